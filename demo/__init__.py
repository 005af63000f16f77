"""The demo, a package of its own beside the platform (`conceptual`), which never imports it:
`make demo` (__main__), its generated web alt-text corpus (corpus), photos and their HTTP
server (images, server), and the README's small example folder (example). The tests and
benchmarks take their inputs from it too."""
