"""Three DAGs whose names test identity: two ids the old tag rule made one (``données_2024``, which
the test's viewer may not read, and ``donn_es_2024``), with task ids it made one too (``tâche`` and
``t_che``), and a DAG named ``unknown``, like the value of the calls nobody could attribute."""

from datetime import datetime

from airflow.sdk import DAG, task

with DAG("données_2024", schedule=None, start_date=datetime(2026, 1, 1), catchup=False):

    @task(task_id="tâche")
    def tache(task_state_store=None):
        task_state_store.get("progress")  # absent
        for part in ("a", "b", "c"):
            task_state_store.set(f"part_{part}", "x" * 10)

    tache()

with DAG("donn_es_2024", schedule=None, start_date=datetime(2026, 1, 1), catchup=False):

    @task(task_id="t_che")
    def t_che(task_state_store=None):
        task_state_store.set("seen", "ab")

    t_che()

with DAG("unknown", schedule=None, start_date=datetime(2026, 1, 1), catchup=False):

    @task
    def note(task_state_store=None):
        task_state_store.set("seen", "abc")

    note()
