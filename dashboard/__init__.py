"""The dashboard: server-rendered pages, Plotly charts and trial controls."""
