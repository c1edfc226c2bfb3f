def main():
    """The `route` command in this process: its SystemExit is the caller's to handle."""
    from router.cli.startup import pause_collection, skip_validation_plugins

    pause_collection()
    skip_validation_plugins()
    from router.cli.app import run

    run()


def program():
    """The `route` program (the console script, `python -m router.cli`): the command, then the
    process ends as soon as its exit handlers have run (router/cli/startup.py)."""
    from router.cli.startup import end_without_teardown

    end_without_teardown(main)
