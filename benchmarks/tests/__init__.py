"""The benchmarks' own tests: the page is the render of the saved results, one verdict rule."""
