"""Analysis over result records, computed with jury.stats: agreement between judges
(agreement: Krippendorff's alpha and friends), comparing two batches (comparison), the trust
report (trust) and fitting a calibration (calibration).
"""
