def main():
    from router.cli.startup import pause_collection, skip_validation_plugins

    pause_collection()
    skip_validation_plugins()
    from router.cli.app import run

    run()
