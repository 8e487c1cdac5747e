"""The ``grinding`` command.

Subcommands live in their own modules under ``robot_grinding_sim.cli`` and are imported only when
used, so ``grinding --help`` stays fast and one subcommand's heavy imports (OpenCascade, MuJoCo,
rclpy) never slow another down.

Conventions every subcommand follows:
- ``--help`` everywhere; ``--json`` where a program reads the output (JSON alone on stdout).
- Bad input (and any file-system failure: missing, not a directory, read-only, full disk): exit
  code 2 and one line ``grinding <cmd>: error: <what is wrong>`` on stderr, nothing written
  (outputs go through :mod:`robot_grinding_sim.core.outfiles`). A defect is one line too
  (``internal error``, exit 1; ``GRINDING_TRACEBACK=1`` shows the traceback).
- Anything long shows a progress bar on stderr (``robot_grinding_sim.cli.common.progress``).
"""

from __future__ import annotations

import importlib
import os
import sys

import click

from robot_grinding_sim import __version__

#: subcommand name -> "module:attribute" of its click command.
COMMANDS: dict[str, str] = {
    "demo": "robot_grinding_sim.cli.demo:demo",
    "dynamics": "robot_grinding_sim.cli.dynamics:dynamics",
    "bounce": "robot_grinding_sim.cli.bounce:bounce",
    "simulate": "robot_grinding_sim.cli.simulate:simulate",
    "plan": "robot_grinding_sim.cli.plan:plan",
    "parts": "robot_grinding_sim.cli.plan:parts",
    "compare": "robot_grinding_sim.cli.compare:compare",
    "report": "robot_grinding_sim.cli.compare:report",
    "bringup": "robot_grinding_sim.cli.bringup:bringup",
    "emulate": "robot_grinding_sim.cli.emulate:emulate",
    "record": "robot_grinding_sim.cli.record:record",
    "check-config": "robot_grinding_sim.cli.check_config:check_config",
    "calibrate": "robot_grinding_sim.cli.calibrate:calibrate",
    "calibration-plan": "robot_grinding_sim.cli.calibrate:calibration_plan_cmd",
    "calibrate-removal": "robot_grinding_sim.cli.calibrate_removal:calibrate_removal",
    "import-log": "robot_grinding_sim.cli.import_log:import_log",
    "replay": "robot_grinding_sim.cli.replay:replay",
    "register": "robot_grinding_sim.cli.register:register",
    "study": "robot_grinding_sim.cli.study:study",
}


def _available(name: str) -> bool:
    module = COMMANDS[name].split(":")[0]
    return importlib.util.find_spec(module) is not None


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(n for n in COMMANDS if _available(n))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS or not _available(cmd_name):
            return None
        module_name, attr = COMMANDS[cmd_name].split(":")
        return getattr(importlib.import_module(module_name), attr)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="grinding")
def cli() -> None:
    """Plan, simulate and check robotic grinding passes."""


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``grinding`` console script; returns the process exit code."""
    from robot_grinding_sim.core.errors import GrindingSimError

    args = list(sys.argv[1:] if argv is None else argv)
    prog = "grinding" + (f" {args[0]}" if args and args[0] in COMMANDS else "")
    try:
        # standalone_mode=False: click returns ctx.exit()'s code (or the callback's value)
        # instead of calling sys.exit, so the errors below get one line each.
        rv = cli.main(args=args, prog_name="grinding", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:
        click.echo(exc.ctx.get_help() if exc.ctx else str(exc))
        return 2
    except click.UsageError as exc:
        click.echo(f"{prog}: error: {_one_line(exc.format_message())}", err=True)
        return 2
    except GrindingSimError as exc:
        click.echo(f"{prog}: error: {_one_line(str(exc))}", err=True)
        return 2
    except OSError as exc:
        # any file-system failure (missing, not a directory, read-only, full disk, permission):
        # the path and the reason, as the system states them
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        click.echo(f"{prog}: error: {where}{exc.strerror or exc}", err=True)
        return 2
    except MemoryError:
        click.echo(f"{prog}: error: out of memory (the input asks for more than this machine has; check the "
                   "part's size and unit, the spacing and the duration)", err=True)
        return 2
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.Abort:
        click.echo(f"{prog}: aborted", err=True)
        return 130
    except click.ClickException as exc:
        click.echo(f"{prog}: error: {_one_line(exc.format_message())}", err=True)
        return exc.exit_code
    except Exception as exc:
        # a defect, not bad input: still one line (the traceback with GRINDING_TRACEBACK=1)
        if os.environ.get("GRINDING_TRACEBACK"):
            raise
        click.echo(f"{prog}: internal error: {type(exc).__name__}: {_one_line(str(exc))} (a bug: please report "
                   "it; GRINDING_TRACEBACK=1 shows the traceback)", err=True)
        return 1
    return rv if isinstance(rv, int) else 0


def _one_line(text: str) -> str:
    """An error message on one line (a multi-line message keeps its lines, joined by '; ')."""
    return "; ".join(ln.strip() for ln in text.splitlines() if ln.strip())


if __name__ == "__main__":
    sys.exit(main())
