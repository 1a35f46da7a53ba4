"""Storm 2.x's windowed bolts (docs/topology-guide.md, "Windows"): count and duration windows,
sliding and tumbling, in processing time or event time with watermarks and late tuples.
`spec` reads a bolt's window settings, `manager` decides the windows (pure), `watermarks`
follows event time, `adapter` runs a windowed bolt on a bolt executor."""
