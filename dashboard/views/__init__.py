"""The dashboard's views: plain functions behind ``@login_required``, one
module per page, as ``registry/api/views/`` has one module per resource.

A module is named after the URL name of the page it serves (``experiments`` the list at ``/``,
``experiment``, ``trial``, ``trial_logs``, ``compare``, ``workers``, ``models``, ``model``) and
holds that page, its live poll and the forms posted from it. A view is named
``<object>_<action>``, the object singular, as ``registry.lifecycle``'s services are
(``experiment_pause``): ``_list`` and ``_detail`` for the pages, ``_live`` for a poll, and a
verb for the rest (``experiment_control``, ``trial_continue``, ``model_version_delete``).
What several pages share (the way back after a POST, the owner checks, the edit-form flow) is in
``_common``; what the views read is in ``dashboard.selectors`` and its siblings.
"""
