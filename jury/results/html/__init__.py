"""The self-contained HTML report (`jury report`): the page (report), its sections
(sections, records, flagged, dimensions, trust) and inline SVG charts (svg_charts). No script,
no network; every text from a batch is escaped.
"""
