"""``python -m telapa.cli`` = ``telapa``."""

from telapa.cli import console_main

console_main()
