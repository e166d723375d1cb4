"""The bundle: rendering a plan into files (render, templates/), checking them before they are written (selfcheck),
writing them all at once (write), `generate` (generate), reading a folder back into the plan its files describe
(read), the consistency of a bundle's files (consistency), and the committed reference bundles (references)."""
