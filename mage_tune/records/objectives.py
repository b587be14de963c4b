"""What a trial's value means, named in every run record and database row: the search writes them, the tuning
database filters by them, importers assign them. A change of meaning is a new name (the /N suffix)."""

STATIC_OBJECTIVE = "static-model-us/5"  # microseconds the static census model predicts
MEASURED_OBJECTIVE = "measured-cold-median-us/1"  # median of a cold CUDA-graph replay, microseconds per launch
