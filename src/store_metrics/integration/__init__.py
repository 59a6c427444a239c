"""Everything Airflow loads or calls: the plugin and what it hooks into each kind of process.

* ``plugin`` -- the plugin class (entry point ``airflow.plugins``): its listener, the API
  server's middleware and the UI's views, each imported only where it is used;
* ``task_listener`` -- the listener: instruments a task's context, flushes at task end;
* ``triggerer`` -- counts the calls of the triggerer's triggers (Airflow internals, isolated);
* ``startup`` -- sets a process up to count, once: what the listener and the triggerer call;
* ``task_tags`` -- a task instance's tags, read one way for tasks and triggers;
* ``provider_info`` -- what Airflow's providers manager reads (entry point
  ``apache_airflow_provider``);
* ``compatibility`` -- the tested Airflow releases, and what ``check`` says about this one.

Whether the installed Airflow counts state store calls itself is ``store_metrics.native``, below
this package and the API server's, which both ask it.

Importing this package loads nothing: every Airflow process loads the plugin.
"""
