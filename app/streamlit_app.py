"""roofcast's Streamlit app: the entry script (``roofcast app`` runs it).

Pages are thin scripts in ``app/views/`` that call the library; shared state and caching live in
``app/state.py``, figures in ``app/charts.py``. A new page is one more ``st.Page`` in ``PAGES``.
"""

from __future__ import annotations

import streamlit as st

from roofcast.app import state
from roofcast.app.wording import inline_code as code

st.set_page_config(page_title="roofcast", page_icon=":material/speed:", layout="wide")

PAGES = {
    "Workload": [
        st.Page("views/model.py", title="Model", icon=":material/schema:", default=True),
        st.Page("views/predict.py", title="Predict", icon=":material/timer:"),
        st.Page("views/roofline.py", title="Roofline", icon=":material/show_chart:"),
        st.Page("views/advisor.py", title="Advisor", icon=":material/explore:"),
    ],
    "LLM serving": [
        st.Page("views/llm.py", title="LLM serving", icon=":material/chat:"),
    ],
    "Multi-device": [
        st.Page("views/plan.py", title="Plan explorer", icon=":material/hub:"),
    ],
    "Hardware": [
        st.Page("views/compare.py", title="Compare hardware", icon=":material/compare_arrows:"),
        st.Page("views/whatif.py", title="What-if device", icon=":material/tune:"),
    ],
    "Data": [
        st.Page("views/measurements.py", title="Measurements & retrain", icon=":material/science:"),
        st.Page("views/sweep.py", title="Sweep explorer", icon=":material/scatter_plot:"),
    ],
}

state.init_state(None)
nav = st.navigation(PAGES)
nav.run()
with st.sidebar:  # after the page: shows the values its widgets just set
    st.markdown("### roofcast")
    st.caption("How fast will this model run on that hardware — and what if…?")
    s = st.session_state
    if s.get("_page") == "llm":  # the LLM page has its own model and devices
        devices = ", ".join(code(d) for d in s.get("llm_devices", [])) or code(None)
        st.markdown(f"**LLM** {code(s.get('llm_label'))}  \n**Devices** {devices}")
    elif s.get("_page") == "sweep":  # the sweep explorer shows a loaded sweep, no model
        st.markdown(f"**Sweep** {code(s.get('sweep_label'), 'none loaded')}")
    elif s.get("_page") == "plan":  # the plan explorer has its own model and system
        st.markdown(f"**Plans of** {code(s.get('plan_label'))}")
    else:
        st.markdown(
            f"**Model** {code(state.model_label(s['model_ref']))}  \n"
            f"**Device** {code(s['device'])}  \n"
            f"**Batch** {s['batch']} · {s['precision']} · {s['mode']}  \n"
            f"**Estimator** {s['estimator']}"
            + (" · fusion" if s["fusion"] else "") + (" · inter-op" if s["inter_op"] else ""))
