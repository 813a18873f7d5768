"""`tcplan completion bash`: a bash completion script generated from the command line's own
parser, so it names exactly the commands, options and choices the parser takes."""

from __future__ import annotations

import argparse


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _options(parser: argparse.ArgumentParser) -> tuple[list[str], dict[str, list[str]],
                                                        list[str]]:
    """(every option string, the choices of each option that has them, the options that
    take a value without choices: a file, a number or a text)."""
    flags: list[str] = []
    choices: dict[str, list[str]] = {}
    valued: list[str] = []
    for a in parser._actions:
        if not a.option_strings:
            continue
        flags += a.option_strings
        if a.choices:
            for o in a.option_strings:
                choices[o] = [str(c) for c in a.choices]
        elif a.nargs != 0:
            valued += a.option_strings
    return flags, choices, valued


def bash_script(parser: argparse.ArgumentParser) -> str:
    """The completion function ``_tcplan`` and its ``complete`` line."""
    cmds = _commands(parser)
    top = ["--version", "-V", *_options(parser)[0]]  # (--version is read before parsing)
    cases, choice_cases = [], []
    for name, p in cmds.items():
        flags, choices, _ = _options(p)
        cases.append(f'    {name}) opts="{" ".join(flags)}" ;;')
        for o, cs in choices.items():
            choice_cases.append(f'    {name}:{o}) words="{" ".join(cs)}" ;;')
    return "\n".join([
        "# bash completion for tcplan (tcplan completion bash); zsh: autoload bashcompinit",
        "_tcplan() {",
        '  local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"',
        f'  local cmds="{" ".join(cmds)}" cmd="" w opts="" words=""',
        '  for w in "${COMP_WORDS[@]:1:COMP_CWORD-1}"; do',
        '    case " $cmds " in *" $w "*) cmd="$w"; break ;; esac',
        "  done",
        '  if [ -z "$cmd" ]; then',
        f'    COMPREPLY=( $(compgen -W "$cmds {" ".join(top)}" -- "$cur") ); return',
        "  fi",
        '  case "$cmd:$prev" in',
        *choice_cases,
        "  esac",
        '  if [ -n "$words" ]; then COMPREPLY=( $(compgen -W "$words" -- "$cur") ); return; fi',
        '  case "$cmd" in',
        *cases,
        "  esac",
        '  case "$cur" in',
        '    -*) COMPREPLY=( $(compgen -W "$opts" -- "$cur") ) ;;',
        '    *) COMPREPLY=( $(compgen -f -- "$cur") ) ;;',
        "  esac",
        "}",
        "complete -o filenames -F _tcplan tcplan",
        ""])
