def main():
    from router.cli.startup import pause_collection

    pause_collection()
    from router.cli.app import run

    run()
