"""The roofcast CLI and Streamlit app (thin layers over the library)."""
