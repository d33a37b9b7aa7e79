from __future__ import annotations

import dataclasses

from ..rule import Rule


class SyntaxErrorRule(Rule):
    """The file is not valid HLO text: nothing else in it can be checked.

    XLA's parser would reject the file, so it would fail at load time long before any sharding is
    looked at. The finding points at the first token the parser could not accept and says what it
    expected. Other files given on the same command line are still linted. A sharding the parser
    rejects does not stop the rest of the file from being linted: it is reported here where the parser
    points in it (the position ``hloshard solve`` and ``cost`` report for the same error: one rule, one
    place; fresh-clone check 33 saw ``41:40`` from lint and ``41:71`` from solve for one misspelt attribute)
    and read as ``{unknown}`` (and shardings whose tile assignment cannot be built at all are reported
    under HS102 instead).

    **Bad**::

        ENTRY e {
          p = f32[8] parameter(0)
          ROOT r = f32[8] add(p, q)      // q is not defined
        }

    **Good**::

        ENTRY e {
          p = f32[8] parameter(0)
          ROOT r = f32[8] add(p, p)
        }
    """

    code = "HS001"
    name = "syntax-error"
    severity = "error"
    groups = ("syntax",)
    text_only = True

    def evaluate(self, context):
        for site, err in context.rejected_shardings:
            found = self.finding(context, site, f"{err.message} (this sharding is read as {{unknown}} "
                                                f"for the other rules)", key=err.message)
            at = _parser_position(context.scan, site, err)
            yield found if at is None else dataclasses.replace(found, line=at[0], column=at[1])
        err = context.syntax_error
        if err is None:
            return
        line = err.line if err.line and err.line > 0 else 1
        column = err.column if err.column and err.column > 0 else 1
        yield self.finding(context, (line, column), err.message, key=err.message)


def _parser_position(scan, site, err):
    """``(line, column)`` in ``site``'s ``{...}`` where the parser's ``err`` points: the error was raised on the
    first site with this text, so its offset within that site's value is carried to ``site``'s (the same text);
    None when the error has no position inside a site (the finding stays at ``sharding=``)."""
    if not getattr(err, "line", 0):
        return None
    offset = scan.offset(err.line, err.column)
    origin = next((s for s in scan.sites if s.value_start <= offset < s.value_end), None)
    if origin is None or origin.text != site.text:
        return None
    return scan.linecol(site.value_start + offset - origin.value_start)
