"""The `mage-tune` command line. Each command lives in its own module and imports heavy code inside its body,
so `--help` stays instant."""

from __future__ import annotations

import sys

import click

from mage_tune.errors import MageError

COMMANDS = {
    "census": ("mage_tune.cli.census_cmd", "census"),
    "doctor": ("mage_tune.cli.doctor_cmd", "doctor"),
    "space": ("mage_tune.cli.space_cmd", "space"),
    "render": ("mage_tune.cli.space_cmd", "render"),
    "compare": ("mage_tune.cli.compare_cmd", "compare"),
    "bench": ("mage_tune.cli.bench_cmd", "bench"),
    "counters": ("mage_tune.cli.counters_cmd", "counters"),
    "search": ("mage_tune.cli.search_cmd", "search"),
    "report": ("mage_tune.cli.report_cmd", "report"),
    "explain": ("mage_tune.cli.report_cmd", "explain"),
    "db": ("mage_tune.cli.db_cmd", "db"),
}

SUMMARIES = {
    "census": "Count what a kernel binary holds: loads, barriers, registers, occupancy, loads in flight.",
    "doctor": "Show which CUDA tools were found, their versions, and how to get what is missing.",
    "space": "Show a kernel family's knobs, domains, constraints and valid configs.",
    "render": "Print the CUDA source of one config of a kernel family.",
    "compare": "Census a variant side by side with Triton's reference kernel.",
    "bench": "Check and time variants and baselines on the GPU.",
    "counters": "Read Nsight Compute's counters for one launch, beside the census's prediction.",
    "search": "Search a family's space with Optuna, recording census and time per trial.",
    "report": "Rebuild a run's tables and plots from its record.",
    "explain": "Say what distinguishes a run's winner.",
    "db": "List, query, export, import and prune the tuning database every search writes to.",
}


class WholeWordsFormatter(click.HelpFormatter):
    """Help text wrapped at spaces only: click's wrapper also breaks after hyphens, which splits option names
    (`--extra-device-` / `vectorization`) and commands (`mage-` / `tune`) across lines."""

    def write_dl(self, rows, col_max=30, col_spacing=2):
        with _whole_words():
            super().write_dl(rows, col_max, col_spacing)

    def write_text(self, text):
        with _whole_words():
            super().write_text(text)


class _whole_words:
    """Within it, click's text wrapper (click._textwrap.TextWrapper, which wrap_text looks up at each call) keeps
    hyphenated words whole; where a click release has no such module, its own wrapping stands."""

    def __enter__(self):
        try:
            from click import _textwrap
        except ImportError:
            self.module = None
            return
        self.module, self.original = _textwrap, _textwrap.TextWrapper

        class Whole(self.original):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, **{**kwargs, "break_on_hyphens": False})

        _textwrap.TextWrapper = Whole

    def __exit__(self, *exc):
        if self.module is not None:
            self.module.TextWrapper = self.original


class HelpContext(click.Context):
    formatter_class = WholeWordsFormatter


def _with_wide(command: click.Command) -> click.Command:
    """Every command takes --wide: output at full width instead of fitting 100 columns (or the terminal's width); a
    group's subcommands too (`db list --wide` as well as `db --wide list`)."""
    from mage_tune import textwidth

    def top(ctx, param, value):  # every run of a command sets it, so no earlier run's --wide stays in force
        textwidth.set_wide(value)

    def sub(ctx, param, value):  # after the group's own: --wide at either place holds
        if value:
            textwidth.set_wide(True)

    for each in [command, *getattr(command, "commands", {}).values()]:
        if not any(p.name == "wide" for p in each.params):
            each.params.append(
                click.Option(
                    ["--wide"],
                    is_flag=True,
                    expose_value=False,
                    is_eager=True,
                    callback=top if each is command else sub,
                    help="Print everything at full width (default: fit 100 columns, or the terminal when wider).",
                )
            )
        each.context_class = HelpContext
    return command


class LazyGroup(click.Group):
    """Imports a command's module only when that command runs."""

    context_class = HelpContext

    def list_commands(self, ctx):
        return list(COMMANDS)

    def get_command(self, ctx, name):
        if name not in COMMANDS:
            return None
        if ctx.resilient_parsing or "--help" in sys.argv[1:2]:
            return click.Command(name, help=SUMMARIES[name], short_help=SUMMARIES[name])
        import importlib

        module, attr = COMMANDS[name]
        try:
            command = getattr(importlib.import_module(module), attr)
        except ModuleNotFoundError as exc:
            if exc.name == module:
                return None
            raise
        return _with_wide(command)

    def format_commands(self, ctx, formatter):
        rows = [(name, SUMMARIES[name]) for name in COMMANDS]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup)
@click.version_option(package_name="mage-tune")
def cli():
    """mage-tune: generate, census, compare, measure and search GPU kernel variants."""


def main_error_text(exc: MageError) -> str:
    """How `mage-tune` says an error: one line (for logs and grep; the terminal wraps it), never a traceback."""
    return f"mage-tune: error: {exc}"


def main() -> None:
    try:
        cli.main(standalone_mode=False)
    except MageError as exc:
        click.echo(main_error_text(exc), err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except Exception as exc:  # a family file's own code raised: the user's input, said in one line with its place
        from mage_tune.user_files import raised_in_user_file

        where = raised_in_user_file(exc)
        if where is None:
            raise  # mage-tune's own fault: the traceback is what a bug report needs
        click.echo(f"mage-tune: error: {where[0]}:{where[1]}: {type(exc).__name__}: {exc}", err=True)
        sys.exit(2)
