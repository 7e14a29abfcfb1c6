"""Finance dashboard (HTML with inline SVG), SRE report and Grafana dashboard renderers."""
