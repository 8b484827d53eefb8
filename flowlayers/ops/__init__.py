"""Ops, each declared once as data (an ``OpDef``: shape and dtype inference, SBP signatures); one file per family."""
