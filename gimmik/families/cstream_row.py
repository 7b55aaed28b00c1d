"""cstream-row (C): cstream's plan walked row by row over one block of
columns, a simd loop per row of C; B's block stays in cache between rows."""

from gimmik.families.cstream import Cstream


class CstreamRow(Cstream):
    name = 'cstream-row'
