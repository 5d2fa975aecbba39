"""Validation of `read_only_sql`: one SELECT over the corpus tables, no writes, no functions
outside an allowlist. sqlglot parses the statement (a hand-written regex check is easy to fool);
the database role and a READ ONLY transaction are the second and third walls."""

from __future__ import annotations

import sqlglot
from sqlglot import exp

ALLOWED_TABLES = {"hierarchical_content_nodes", "books", "embedding_models", "function_versions"}
ALLOWED_FUNCTIONS = {
    "count", "sum", "avg", "min", "max", "length", "char_length", "lower", "upper", "coalesce", "nullif", "round",
    "floor", "ceil", "abs", "greatest", "least", "string_agg", "array_agg", "substr", "substring", "left", "right",
    "split_part", "trim", "btrim", "replace", "position", "strpos", "concat", "bool_or", "bool_and", "array_length",
    "cardinality", "vector_dims", "percentile_cont", "stddev", "variance", "regexp_replace", "starts_with", "row_number",
    "rank", "dense_rank", "date_trunc", "extract", "to_char", "cast", "trycast", "if", "case",
    # the names sqlglot gives some of the above once parsed
    "group_concat", "str_position", "time_to_str", "timestamp_trunc", "logical_or", "logical_and", "array_size", "array",
}
RAG_FUNCTIONS = {"list_books", "outline", "get_node", "get_parent", "get_children", "search_branch"}
FORBIDDEN = (exp.Insert, exp.Update, exp.Delete, exp.Create, exp.Drop, exp.Alter, exp.Command, exp.Into, exp.Lock,
             exp.Merge, exp.TruncateTable, exp.Copy, exp.Set, exp.Transaction, exp.Commit, exp.Rollback)


class UnsafeSQL(ValueError):
    """The statement is not a single read-only SELECT over the corpus."""


def _function_name(node: exp.Expression) -> str:
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower()
    return (node.sql_name() if hasattr(node, "sql_name") else type(node).__name__).lower()


def _written_name(node: exp.Expression) -> str:
    """The function's name as PostgreSQL spells it (sqlglot renames some: version() is its
    current_version()), for messages."""
    try:
        text = node.sql(dialect="postgres")
    except Exception:  # noqa: BLE001 - a name for a message only
        return ""
    head = text.split("(", 1)[0].strip().lower()
    return head.rsplit(".", 1)[-1] if head.replace("_", "").replace(".", "").isalnum() else ""


def _ctes_in_scope(node: exp.Expression) -> set[str]:
    """Names of the CTEs visible from node: those of the WITH clauses of its ancestors only (a
    CTE defined in a subquery must not whitelist a real table of the same name outside it)."""
    names: set[str] = set()
    parent = node.parent
    while parent is not None:
        with_ = parent.args.get("with_") or parent.args.get("with") if isinstance(parent, exp.Expression) else None
        if isinstance(with_, exp.With):
            names |= {c.alias_or_name.lower() for c in with_.expressions}
        parent = parent.parent
    return names


def check_select(sql: str) -> str:
    """Return the statement when it is safe; raise UnsafeSQL naming what is not allowed."""
    if "\x00" in sql:
        raise UnsafeSQL("the statement contains a NUL character")
    try:
        statements = [s for s in sqlglot.parse(sql, read="postgres") if s is not None]
    except sqlglot.errors.SqlglotError as exc:
        raise UnsafeSQL(f"cannot parse the statement: {str(exc).splitlines()[0]}") from exc
    except RecursionError as exc:
        raise UnsafeSQL("the statement is nested too deeply to check; simplify it") from exc
    if len(statements) != 1:
        raise UnsafeSQL(f"exactly one statement is allowed, got {len(statements)}")
    try:
        return _check_tree(statements[0], sql)
    except RecursionError as exc:
        raise UnsafeSQL("the statement is nested too deeply to check; simplify it") from exc


def _check_tree(tree: exp.Expression, sql: str) -> str:
    if not isinstance(tree, (exp.Select, exp.Union, exp.Intersect, exp.Except, exp.Subquery)) and not (
            isinstance(tree, exp.With) or tree.find(exp.Select) is tree):
        raise UnsafeSQL(f"only SELECT is allowed, got {tree.key.upper()}")
    for node in tree.walk():
        if isinstance(node, FORBIDDEN):
            raise UnsafeSQL(f"{node.key.upper()} is not allowed: read-only SELECT only")
        if isinstance(node, exp.Table):
            name, schema = node.name.lower(), (node.db or "").lower()
            if isinstance(node.this, exp.Anonymous) or isinstance(node.this, exp.Func):
                continue  # a set-returning function in FROM: checked as a function below
            if name in ALLOWED_TABLES and schema in ("rag", ""):
                continue
            if not schema and name in _ctes_in_scope(node):
                continue
            label = f"{schema + '.' if schema else ''}{name}" or node.sql(dialect="postgres")[:80]
            raise UnsafeSQL(f"table {label} is not readable here; "
                            f"use rag.{', rag.'.join(sorted(ALLOWED_TABLES))}")
        if isinstance(node, exp.Func) and not isinstance(node, (exp.Cast, exp.Case, exp.If, exp.Paren)):
            name = _function_name(node)
            parent = node.parent
            if isinstance(parent, exp.Table):
                schema = (parent.db or "").lower()
            elif isinstance(parent, exp.Dot):
                schema = parent.this.name.lower()
            else:
                schema = ""
            if schema == "rag" and name in RAG_FUNCTIONS:
                continue
            if name in ALLOWED_FUNCTIONS or type(node).__name__.lower() in ALLOWED_FUNCTIONS:
                continue
            name = _written_name(node) or name
            raise UnsafeSQL(f"function {name}() is not allowed (allowed: aggregates, string and math helpers, "
                            f"rag.{', rag.'.join(sorted(RAG_FUNCTIONS))})")
    return sql
