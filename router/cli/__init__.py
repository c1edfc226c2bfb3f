def main():
    from router.cli.app import run
    run()
