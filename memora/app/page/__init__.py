"""The Streamlit page's pieces. Only this package and streamlit_app.py import streamlit."""
