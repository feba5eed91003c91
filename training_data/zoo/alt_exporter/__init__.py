"""Zoo models from the other torch exporter (package data only; see ``training_data.zoo``)."""
