from __future__ import annotations

from ..rule import Rule


class SyntaxErrorRule(Rule):
    """The file is not valid HLO text: nothing else in it can be checked.

    XLA's parser would reject the file, so it would fail at load time long before any sharding is
    looked at. The finding points at the first token the parser could not accept and says what it
    expected. Other files given on the same command line are still linted. A sharding the parser
    rejects does not stop the rest of the file from being linted: it is reported here at its
    ``sharding=`` and read as ``{unknown}`` (and shardings whose tile assignment cannot be built
    at all are reported under HS102 instead).

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
            yield self.finding(context, site, f"{err.message} (this sharding is read as {{unknown}} "
                                              f"for the other rules)", key=err.message)
        err = context.syntax_error
        if err is None:
            return
        line = err.line if err.line and err.line > 0 else 1
        column = err.column if err.column and err.column > 0 else 1
        yield self.finding(context, (line, column), err.message, key=err.message)
