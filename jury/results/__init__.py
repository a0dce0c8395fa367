"""What a batch produced, as people read it: record formats (json, jsonl, the terminal
table: formats; csv_records), per-sample rows (samples), pairwise totals (pairwise_totals,
shown by pairwise), the trust tables, the dry-run plan table, records with people's labels
(labelled), and untrusted text made safe for a terminal (terminal). The self-contained HTML
report is in results.html.
"""
