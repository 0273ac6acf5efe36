"""The ``lswmkc-cli`` directive: the reference of the ``lswmkc`` command, generated from
its argument parser (:func:`lswmkc_dask.cli._parser.build_parser`).

One section per command: its description, its usage line and each option with its help
(``%(default)s`` expanded, as ``lswmkc COMMAND --help`` prints it). The help texts are
plain text, not reStructuredText: they are written into the nodes as they are.
"""

from __future__ import annotations

import argparse

from docutils import nodes
from sphinx.util.docutils import SphinxDirective


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _option_item(parser: argparse.ArgumentParser, action: argparse.Action) -> nodes.definition_list_item:
    formatter = parser._get_formatter()
    invocation = formatter._format_action_invocation(action)
    help_text = formatter._expand_help(action) if action.help else ""
    item = nodes.definition_list_item()
    term = nodes.term()
    term += nodes.literal(invocation, invocation)
    item += term
    definition = nodes.definition()
    definition += nodes.paragraph(help_text, help_text)
    item += definition
    return item


def _command_section(document, name: str, sub: argparse.ArgumentParser) -> nodes.section:
    section = nodes.section(ids=[f"lswmkc-{name}"], names=[f"lswmkc {name}"])
    title = f"lswmkc {name}"
    section += nodes.title(title, "", nodes.literal(title, title))
    if sub.description:
        section += nodes.paragraph(sub.description, sub.description)
    usage = sub.format_usage().strip()
    section += nodes.literal_block(usage, usage, language="text")
    for group in sub._action_groups:
        actions = [a for a in group._group_actions if a.help is not argparse.SUPPRESS]
        if not actions:
            continue
        section += nodes.rubric(group.title, group.title)
        items = nodes.definition_list()
        for action in actions:
            items += _option_item(sub, action)
        section += items
    document.note_implicit_target(section, section)
    return section


class LswmkcCli(SphinxDirective):
    """``.. lswmkc-cli::``: every command of ``lswmkc`` with its options."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        """The usage of ``lswmkc``, then a section per command."""
        from lswmkc_dask.cli._parser import build_parser

        parser = build_parser()
        out: list[nodes.Node] = []
        usage = parser.format_help().strip()
        out.append(nodes.literal_block(usage, usage, language="text"))
        for name, sub in _subcommands(parser).items():
            out.append(_command_section(self.state.document, name, sub))
        return out


def setup(app):
    """Register the directive."""
    app.add_directive("lswmkc-cli", LswmkcCli)
    return {"version": "1", "parallel_read_safe": True}
