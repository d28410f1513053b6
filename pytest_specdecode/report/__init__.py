"""What a run produced: results, gates, the JSON report, summaries, plots, the CLI."""
