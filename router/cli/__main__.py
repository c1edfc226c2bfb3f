from router.cli import program

program()
