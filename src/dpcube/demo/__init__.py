"""The demo: a synthetic person table, released with Identity and queried."""
