"""`route consortium save|list|show|remove`: named consortia in the config (the live view of one
answering is router/cli/live.py).

`save` and `remove` edit the user config file (`route doctor` prints where it is), keeping the
rest of it as written; a new user config starts as a copy of the shipped default.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any

import typer

from router.cli.commands import command_app
from router.cli.errors import handle_errors
from router.cli.options import Config, ConfigToEdit, Json
from router.cli.output import Output

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["app", "import_", "list_", "remove", "save", "show"]

app = command_app("consortium", help="Named consortia: N models answer, a fast arbiter ranks or synthesizes.",
                  no_args_is_help=True)


def _entry(name: str, members: list[str], arbiter: str, judging: str, options: dict[str, Any]) -> dict[str, Any]:
    """The config entry, checked before any file is touched; a bad value is one plain sentence."""
    from pydantic import ValidationError

    from backends.errors import UsageError
    from router.consortium.spec import ConsortiumConfig

    entry: dict[str, Any] = {"members": list(members), "arbiter": arbiter, "judging": judging}
    entry.update({k: v for k, v in options.items() if v is not None})
    try:
        ConsortiumConfig.model_validate(entry)
    except ValidationError as exc:
        problems = "; ".join(_problem(error, members) for error in exc.errors(include_url=False))
        raise UsageError(f"consortium {name!r} is invalid: {problems}.") from None
    return entry


def _problem(error: Mapping[str, Any], members: list[str]) -> str:
    where = error.get("loc", ())
    message = str(error.get("msg", "invalid")).removeprefix("Value error, ")
    if where and where[0] == "members" and len(where) > 1 and isinstance(where[1], int) and where[1] < len(members):
        return f"member {members[where[1]]!r}: {message} (write NAME or NAME*N with N of at least 1)"
    return f"{'.'.join(str(p) for p in where) or 'value'}: {message}"


def _target(config: str | None):
    """The file `save` edits: --config FILE, else the user config file."""
    from pathlib import Path

    from router.paths import user_config_file

    return Path(config) if config else user_config_file()


def _target_text(path) -> str:
    from router.config_loader import _embedded_text

    return path.read_text(encoding="utf-8") if path.is_file() else _embedded_text()


def _checked(path, text: str) -> str:
    """`text` once it validates. A file not written yet has no lines to point at, so its errors
    are told without a file:line that the user would look for in vain."""
    from backends.errors import ConfigError, UsageError
    from router.config_loader import parse_config

    try:
        parse_config(text, str(path))
    except ConfigError as exc:
        if path.is_file():
            raise
        bare = str(exc).removeprefix(f"{exc.path}:{exc.line}: " if exc.line else f"{exc.path}: ")
        raise UsageError(f"{bare} (nothing was written; {path} does not exist yet)") from None
    return text


def _shadow_note(out: Output) -> None:
    from router.config_loader import find_config
    from router.paths import user_config_file

    found = find_config()
    if found is not None and found.resolve() != user_config_file().resolve():
        out.info(f"[yellow]note:[/] {found} is found before the user config, so it is the one in use; "
                 "pass `--config` to choose.")


def _tree(node: dict[str, Any]):
    from rich.markup import escape
    from rich.tree import Tree

    def label(n: dict[str, Any]) -> str:
        samples = f" ×{n['samples']}" if n.get("samples", 1) > 1 else ""
        if n["kind"] == "backend":
            return f"{escape(n['name'])}{samples} [dim]({escape(str(n.get('model')))})[/]"
        if n.get("ref"):  # a shared sub-consortium, expanded where it first appears
            return f"[bold]{escape(n['name'])}[/]{samples} [dim](as above)[/]"
        return (f"[bold]{escape(n['name'])}[/]{samples} [dim]{n['judging']}, "
                f"{_calls(n['calls_per_run'], n['worst_case_calls'])} calls/run, budget {n['budget']}[/]")

    def grow(tree, n: dict[str, Any]) -> None:
        if n["kind"] != "consortium" or n.get("ref"):
            return
        arb = tree.add("arbiter: " + label(n["arbiter"]))
        grow(arb, n["arbiter"])
        for member in n["members"]:
            grow(tree.add(label(member)), member)

    root = Tree(label(node))
    grow(root, node)
    return root


@app.command("save", help="Save a consortium into the user config. llm-consortium's flags work: -m MODEL or "
             "MODEL:N (or MODEL*N), repeated; -n N samples of each; --judging-method rank|synthesis (its `default` "
             "is synthesis).")
@handle_errors
def save(
    name: Annotated[str, typer.Argument(help="The consortium's name, usable as `route -m NAME`.")],
    members: Annotated[list[str], typer.Option(
        "-m", "--member", "--model", help="A backend or consortium: NAME, NAME*N or NAME:N (N samples); repeat.")],
    arbiter: Annotated[str, typer.Option("--arbiter", help="Backend or consortium that judges.")],
    count: Annotated[int, typer.Option("-n", "--count", min=1, max=64,
                                       help="Samples of each member given without a count.")] = 1,
    judging: Annotated[str, typer.Option("--judging", "--judging-method",
                                         help="rank | synthesis (llm-consortium's `default` is synthesis)")] = "rank",
    confidence_threshold: Annotated[float | None, typer.Option(
        "--confidence-threshold", help="0..1, or a percent: another round while the arbiter is less sure.")] = None,
    min_iterations: Annotated[int | None, typer.Option("--min-iterations", min=1)] = None,
    max_iterations: Annotated[int | None, typer.Option("--max-iterations", min=1)] = None,
    quorum: Annotated[int | None, typer.Option("--quorum", min=1, help="Answers that are enough.")] = None,
    member_timeout: Annotated[float | None, typer.Option("--member-timeout", help="Seconds.")] = None,
    budget: Annotated[int | None, typer.Option("--budget", min=1, help="Most model calls per run.")] = None,
    system: Annotated[str | None, typer.Option("--system", help="System prompt for every member.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing consortium.")] = False,
    json_output: Json = False,
    config: ConfigToEdit = None,
) -> None:
    from backends.errors import UsageError
    from router.config_loader import parse_config
    from router.consortium.llm_compat import judging_of, members_of, threshold_of
    from router.consortium.userconfig import add_entry, write_config

    out = Output(json_mode=json_output)
    try:
        judging = judging_of(judging)
        threshold = None if confidence_threshold is None else threshold_of(confidence_threshold)
    except ValueError as exc:
        raise UsageError(f"{exc}.") from None
    path = _target(config)
    text = _target_text(path)
    current = parse_config(text, str(path)).config  # a broken file is reported with its line, not edited
    known = set(current.backends) | set(current.consortia)
    members = members_of(members, count, known)
    options = dict(confidence_threshold=threshold, min_iterations=min_iterations,
                   max_iterations=max_iterations, quorum=quorum, member_timeout_s=member_timeout,
                   budget=budget, system=system)
    entry = _entry(name, members, arbiter, judging, options)
    _check_names(name, entry, known, path)
    new_text = _checked(path, add_entry(text, name, entry, replace=force))
    loaded = write_config(path, new_text)
    if json_output:
        out.data({"saved": name, "path": str(path), "entry": entry})
    else:
        out.info(f"saved consortium [bold]{name}[/] to {path} (line {loaded.line_of('consortia', name)})")
    if config is None:
        _shadow_note(out)


def _check_names(name: str, entry: dict[str, Any], known: set[str], path) -> None:
    """Members and arbiter must exist in the file being edited; one that does not is told with
    the command that adds it (a name from llm is usually a model no backend serves here yet)."""
    from backends.errors import UsageError
    from router.config_loader import _did_you_mean
    from router.consortium.spec import parse_member

    names = [parse_member(m)["model"] for m in entry["members"]] + [entry["arbiter"]]
    missing = [n for n in dict.fromkeys(names) if n not in known and n != name]
    if not missing:
        return
    first = missing[0]
    hint = _did_you_mean(first, known)
    where = path if path.is_file() else "the shipped default (the config this save starts from)"
    raise UsageError(
        f"consortium {name!r}: {', '.join(repr(m) for m in missing)} "
        f"{'is' if len(missing) == 1 else 'are'} neither a backend nor a consortium in {where}.{hint} "
        f"Add {'it' if len(missing) == 1 else 'each'} first, e.g. `route backend add {first} --model MODEL "
        f"--base-url URL --api-key-env VAR` (or a provider's block by name: `route backend add openrouter`), "
        "then save again.")


@app.command("import", help="Import the consortia llm-consortium saved (`llm consortium save`), nested ones "
                            "included, into the user config (or the file given with -c).")
@handle_errors
def import_(
    names: Annotated[list[str] | None, typer.Argument(help="Only these (default: every saved consortium).")] = None,
    db: Annotated[str | None, typer.Option("--db", help="llm-consortium's database (default: found in llm's "
                                           "user directory, LLM_USER_PATH first).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace consortia of the same name.")] = False,
    json_output: Json = False,
    config: ConfigToEdit = None,
) -> None:
    from router.config_loader import parse_config
    from router.consortium.llm_import import find_database
    from router.consortium.userconfig import add_entry, write_config

    out = Output(json_mode=json_output)
    source = find_database(db)
    chosen = _chosen(source, names)
    path = _target(config)
    text = _target_text(path)
    current = parse_config(text, str(path)).config  # a broken file is reported with its line, not edited
    entries, notes = _converted(chosen, source)
    _check_imported(entries, set(current.backends) | set(current.consortia), path, source)
    notes += _budgets(entries, current.consortia)
    for name, entry in entries.items():
        text = add_entry(text, name, entry, replace=force)
    write_config(path, _checked(path, text))
    _report_import(out, entries, notes, source, path, json_output=json_output)


def _chosen(source: Path, names: list[str] | None) -> dict[str, dict[str, Any]]:
    """The saved consortia of `names` (default all), as llm-consortium wrote them."""
    from backends.errors import UsageError
    from router.consortium.llm_import import saved_consortia

    saved = saved_consortia(source)
    unknown = [n for n in names or [] if n not in saved]
    if unknown:
        raise UsageError(f"{source} has no consortium {unknown[0]!r}; it has {', '.join(saved) or 'none'}.")
    chosen = {n: saved[n] for n in names} if names else saved
    if not chosen:
        raise UsageError(f"{source} holds no saved consortium; `llm consortium save NAME ...` saves one.")
    return chosen


def _converted(chosen: dict[str, dict[str, Any]], source: Path) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Our entries for `chosen`, and a note per setting of theirs with no counterpart here."""
    from backends.errors import UsageError
    from router.consortium.llm_compat import entry_from_llm_consortium

    entries, notes = {}, []
    for name, data in chosen.items():
        try:
            entries[name], left_out = entry_from_llm_consortium(data)
        except ValueError as exc:
            raise UsageError(f"{source}: consortium {name!r} cannot be imported: {exc}.") from None
        notes += [f"{name}: {note}" for note in left_out]
    return entries, notes


def _report_import(out: Output, entries: dict[str, dict[str, Any]], notes: list[str], source: Path, path: Path, *,
                   json_output: bool) -> None:
    if json_output:
        out.data({"imported": list(entries), "from": str(source), "path": str(path), "notes": notes})
        return
    out.info(f"imported {len(entries)} consortia from {source} into {path}: {', '.join(entries)}. "
             f"`route consortium show {next(reversed(entries))}` draws one.")
    for note in notes:
        out.info(f"[yellow]note:[/] {note}")


def _budgets(entries: dict[str, dict[str, Any]], existing: Mapping[str, Any]) -> list[str]:
    """llm-consortium sets no limit on calls: an imported consortium that plans more than our
    default budget gets `budget:` set to what it plans, so it runs as it did there (a note says so)."""
    from router.consortium.graph import calls_per_run
    from router.consortium.spec import DEFAULT_BUDGET, ConsortiumConfig

    consortia = {**existing, **{n: ConsortiumConfig.model_validate(e) for n, e in entries.items()}}
    notes = []
    memo: dict[tuple[str, bool], int] = {}
    for name, entry in entries.items():
        worst = calls_per_run(name, consortia, worst=True, memo=memo)
        if "budget" not in entry and worst > DEFAULT_BUDGET:
            entry["budget"] = worst
            notes.append(f"{name}: plans up to {worst} model calls a run ({entry.get('max_iterations', 1)} "
                         f"iterations, nested consortia expanded), more than the default budget of {DEFAULT_BUDGET}; "
                         f"`budget: {worst}` is written (llm-consortium sets no limit). Lower max_iterations to "
                         "spend less.")
    return notes


def _check_imported(entries: dict[str, dict[str, Any]], known: set[str], path, source) -> None:
    """Every model the imported consortia name is a backend here, or one of them; a model llm
    knows and no backend serves is told with the command that adds it, before anything is written."""
    from backends.errors import UsageError
    from router.consortium.spec import parse_member

    names = [parse_member(m)["model"] for e in entries.values() for m in e["members"]]
    names += [e["arbiter"] for e in entries.values()]
    missing = [n for n in dict.fromkeys(names) if n not in known and n not in entries]
    if missing:
        where = path if path.is_file() else "the shipped default (the config this import starts from)"
        raise UsageError(
            f"the consortia in {source} use {', '.join(missing)}, which "
            f"{'is not a backend' if len(missing) == 1 else 'are not backends'} in {where}; nothing was written. Add each with `route backend add NAME --model MODEL "
            "--base-url URL` (or a provider's block, e.g. `route backend add openrouter`), then import again.")


@app.command("remove", help="Remove a consortium from the user config (or the file given with -c).")
@handle_errors
def remove(name: Annotated[str, typer.Argument()], json_output: Json = False, config: ConfigToEdit = None) -> None:
    from backends.errors import UsageError
    from router.config_loader import parse_config
    from router.consortium.userconfig import remove_entry, write_config

    out = Output(json_mode=json_output)
    path = _target(config)
    if not path.is_file():
        raise UsageError(f"there is no config at {path} yet, so nothing to remove")
    text = path.read_text(encoding="utf-8")
    parsed = parse_config(text, str(path)).config
    users = [f"{c} ({'arbiter' if s.arbiter == name else 'member'})" for c, s in parsed.consortia.items()
             if c != name and name in s.names()]
    users += [f"routing tier {t.name!r}" for t in parsed.routing.tiers if name in t.backends]
    if users:
        raise UsageError(f"consortium {name!r} is used by {', '.join(users)}; remove or change those first")
    write_config(path, remove_entry(text, name))
    if json_output:
        out.data({"removed": name, "path": str(path)})
    else:
        out.info(f"removed consortium [bold]{name}[/] from {path}")


@app.command("list", help="List the consortia of the config in use.")
@handle_errors
def list_(json_output: Json = False, config: Config = None) -> None:
    from router.config_loader import load_config

    out = Output(json_mode=json_output)
    loaded = load_config(config)
    rows: list[dict[str, Any]] = [{"name": n, "members": [m.short() for m in s.members], "arbiter": s.arbiter, "judging": s.judging,
             "iterations": f"{s.min_iterations}-{s.max_iterations}", "budget": s.budget,
             "line": loaded.line_of("consortia", n)} for n, s in loaded.config.consortia.items()]
    if json_output:
        out.data({"config": loaded.path, "consortia": rows})
        return
    if not rows:
        out.info(f"no consortia in {loaded.path}; add one with `route consortium save NAME -m MODEL*5 --arbiter MODEL`")
        return
    from rich.table import Table

    table = Table(title=f"consortia ({loaded.path})", title_justify="left", pad_edge=False)
    table.add_column("name", no_wrap=True, min_width=max([len(r["name"]) for r in rows] + [4]))
    for column in ("members", "arbiter", "judging", "iterations", "budget"):
        table.add_column(column, overflow="fold")
    for r in rows:
        table.add_row(r["name"], ", ".join(r["members"]), r["arbiter"], r["judging"], r["iterations"],
                      str(r["budget"] or "-"))
    out.out.print(table)


@app.command("show", help="Show a consortium as a tree, resolved down to backends.")
@handle_errors
def show(name: Annotated[str, typer.Argument()], json_output: Json = False, config: Config = None) -> None:
    from backends.errors import UsageError
    from router.config_loader import _did_you_mean, load_config
    from router.consortium.graph import resolve_tree

    out = Output(json_mode=json_output)
    loaded = load_config(config)
    consortia = loaded.config.consortia
    if name not in consortia:
        raise UsageError(f"no consortium {name!r} in {loaded.path}.{_did_you_mean(name, consortia)} "
                         "`route consortium list` shows them.")
    tree = resolve_tree(name, consortia, loaded.config.backends)
    if json_output:
        out.data(tree)
    else:
        out.out.print(_tree(tree))


def _calls(least: int, most: int) -> str:
    """Planned calls per run: least (min_iterations) to most (max_iterations), retries aside."""
    return str(least) if least == most else f"{least}-{most}"
