"""The TUI's screens: main (tune), results, compare, export, model picker, quit confirm."""
