"""Regression tests for the security review's untrusted-input findings: hostile archives, configs,
metric reports, log lines and checkpoint file maps are bounded before they are parsed or stored.

Each test is named after the finding it reproduces (docs/security.md, "Untrusted input: limits").
"""

from __future__ import annotations

import gzip
import io
import os
import tarfile
import threading
import uuid

import pytest
import requests

from headway.archive import (
    ModelDefinitionError,
    check_model_definition_isolated,
    prescan_tar_gz,
)
from tests.helpers import TINY_CONFIG, TINY_MODEL, b64, make_tar_gz

pytestmark = pytest.mark.django_db


# --- hostile archives -------------------------------------------------------------------------


def pax_archive(pax_body: bytes, files: dict[str, bytes] | None = None) -> bytes:
    """A ``tar.gz`` whose first member has the PAX extended header ``pax_body`` (as is)."""
    raw = io.BytesIO()
    header = tarfile.TarInfo("././@PaxHeader")
    header.type = tarfile.XHDTYPE
    header.size = len(pax_body)
    raw.write(header.tobuf(format=tarfile.USTAR_FORMAT))
    raw.write(pax_body + b"\0" * (-len(pax_body) % tarfile.BLOCKSIZE))
    for name, data in (files or {"model_def.py": b"class TinyTrial:\n    pass\n"}).items():
        info = tarfile.TarInfo(name)
        info.size = len(data)
        raw.write(info.tobuf(format=tarfile.USTAR_FORMAT))
        raw.write(data + b"\0" * (-len(data) % tarfile.BLOCKSIZE))
    raw.write(b"\0" * 2 * tarfile.BLOCKSIZE)
    return gzip.compress(raw.getvalue())


# CVE-2024-6232: tarfile searches the header for r"\d+ hdrcharset=" from every position, so a
# run of n digits costs n²/2 steps: 4 MiB of digits (4 KB gzip'd) is hours of CPU on 3.11.7.
PAX_REGEX_BOMB = pax_archive(b"1" * (4 * 1024 * 1024))


def upload(api, model: bytes, config: str = TINY_CONFIG):
    return api.post(
        "/api/v1/experiments/", {"config": config, "model_definition": b64(model)}, format="json"
    )


def test_finding_pax_header_regex_does_not_block_the_server(live_server, django_user_model):
    from rest_framework.authtoken.models import Token

    assert len(PAX_REGEX_BOMB) < 110_000  # the size of the reported upload
    token = Token.objects.create(user=django_user_model.objects.create_user("eve", password="e"))
    answers: list[requests.Response] = []

    def post() -> None:
        answers.append(
            requests.post(
                f"{live_server.url}/api/v1/experiments/",
                json={"config": TINY_CONFIG, "model_definition": b64(PAX_REGEX_BOMB)},
                headers={"Authorization": f"Token {token.key}"},
                timeout=60,
            )
        )

    uploader = threading.Thread(target=post)
    uploader.start()
    health = [requests.get(f"{live_server.url}/healthz", timeout=5).status_code]
    while uploader.is_alive():
        health.append(requests.get(f"{live_server.url}/healthz", timeout=5).status_code)
    uploader.join()
    assert set(health) == {200}
    assert answers[0].status_code == 400
    [message] = answers[0].json()["errors"]["model_definition"]
    assert "extended header" in message  # over the size limit of one header


def test_finding_pax_header_regex_digit_runs_are_refused_under_the_size_limit():
    # 60,000 digits fit the 64 KiB header limit but still cost tarfile n²/2 steps.
    with pytest.raises(ModelDefinitionError, match="CVE-2024-6232"):
        prescan_tar_gz(pax_archive(b"1" * 60_000))


def test_finding_pax_header_regex_malformed_records_are_refused():
    # Records of length 2 ("2 2 2 ... =") make tarfile's anchored regex scan to the one "=" from
    # every record: quadratic time, and a keyword per record (quadratic memory).
    with pytest.raises(ModelDefinitionError, match="malformed PAX record"):
        prescan_tar_gz(pax_archive(b"2 " * 30_000 + b"=\n"))


def test_finding_pax_header_regex_a_check_over_its_time_limit_is_stopped(api, settings):
    settings.HEADWAY_ARCHIVE_CHECK_TIMEOUT_SECONDS = 0.001  # less than the child's start-up
    response = upload(api, TINY_MODEL)
    assert response.status_code == 400
    assert "took longer than" in response.json()["errors"]["model_definition"][0]


def test_finding_archive_header_memory_bomb_is_refused(api):
    # Well-formed records, 8 MiB of them in one header (8 KB gzip'd): tarfile holds them all.
    record = b"30 comment=" + b"x" * 18 + b"\n"
    response = upload(api, pax_archive(record * (8 * 1024 * 1024 // len(record))))
    assert response.status_code == 400
    assert "extended header" in response.json()["errors"]["model_definition"][0]
    long_name = b"x" * (1024 * 1024)  # a GNU long name of 1 MiB
    raw = io.BytesIO()
    header = tarfile.TarInfo("././@LongLink")
    header.type = tarfile.GNUTYPE_LONGNAME
    header.size = len(long_name)
    raw.write(header.tobuf(format=tarfile.USTAR_FORMAT) + long_name + b"\0" * 1024)
    response = upload(api, gzip.compress(raw.getvalue()))
    assert "extended header" in response.json()["errors"]["model_definition"][0]


def test_finding_archive_header_memory_bomb_the_check_has_a_memory_limit():
    # The entrypoint check reads and parses a 16 MiB module (16 KiB packed): more than the
    # child's whole 8 MiB address space, so an allocation must fail, whatever was mapped before.
    source = "class TinyTrial:\n    pass\n# " + "x" * (16 * 1024 * 1024) + "\n"
    archive = make_tar_gz({"model_def.py": source})
    entrypoint = ("model_def", "TinyTrial")
    with pytest.raises(ModelDefinitionError, match="out of time or memory"):
        check_model_definition_isolated(
            archive, entrypoint_class=entrypoint, memory_bytes=8 * 1024 * 1024
        )
    # The same archive passes under the default limit: the refusal above is the limit's doing.
    assert check_model_definition_isolated(archive, entrypoint_class=entrypoint) > len(source) - 1


def test_finding_archive_header_memory_bomb_error_text_is_bounded():
    from django.conf import settings

    from headway.exec.loglines import clean_line

    limit = settings.HEADWAY_MAX_LOG_LINE_CHARS
    line = clean_line("[headway] could not launch the trial: " + "x" * 10_000_000, limit)
    assert len(line) <= limit and line.endswith(" characters cut]")
    assert clean_line(line, limit) == line


def test_finding_archive_bounded_check_accepts_real_archives(api):
    assert check_model_definition_isolated(TINY_MODEL) > 0
    ustar = make_tar_gz({"model_def.py": "class TinyTrial:\n    pass\n", "x" * 150: "long"})
    assert upload(api, ustar).status_code == 201  # a PAX header for the long name is fine


def test_finding_trailing_garbage_after_gzip_is_refused(api):
    response = upload(api, TINY_MODEL + b"trailing garbage")
    assert response.status_code == 400
    assert "trailing data" in response.json()["errors"]["model_definition"][0]
    assert upload(api, TINY_MODEL[:-5]).status_code == 400  # truncated


# --- configs ----------------------------------------------------------------------------------

BILLION_LAUGHS = (
    TINY_CONFIG
    + 'description: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    + "".join(f"x{i}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8))
)


def test_finding_yaml_billion_laughs_is_refused(api):
    assert len(BILLION_LAUGHS) < 1000
    response = upload(api, TINY_MODEL, config=BILLION_LAUGHS)
    assert response.status_code == 400
    assert "YAML aliases" in response.json()["errors"]["config"][0]


def test_finding_yaml_billion_laughs_a_recursive_alias_is_refused(api):
    response = upload(api, TINY_MODEL, config=TINY_CONFIG + "labels: &l [*l]\n")
    assert response.status_code == 400 and "config" in response.json()["errors"]


def test_finding_yaml_billion_laughs_deep_nesting_is_a_400_not_a_500(api):
    response = upload(api, TINY_MODEL, config=TINY_CONFIG + "labels: " + "[" * 5000 + "]" * 5000)
    assert response.status_code == 400
    assert "nested too deeply" in response.json()["errors"]["config"][0]


def test_finding_yaml_billion_laughs_config_size_is_bounded(api, settings):
    settings.HEADWAY_MAX_CONFIG_BYTES = 2000
    response = upload(api, TINY_MODEL, config=TINY_CONFIG + "description: " + "d" * 3000 + "\n")
    assert response.status_code == 400
    assert "2000-byte limit" in response.json()["errors"]["config"][0]
    assert upload(api, TINY_MODEL).status_code == 201


# --- upload size limits -----------------------------------------------------------------------


def test_finding_uploads_over_2_5_mb_are_accepted_up_to_the_limit(api):
    big = make_tar_gz({"model_def.py": "class TinyTrial:\n    pass\n", "blob.bin": ""})
    blob = os.urandom(3 * 1024 * 1024)  # incompressible: a 3 MiB archive, a 4 MiB body
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        with tarfile.open(fileobj=io.BytesIO(big), mode="r:gz") as small:
            for member in small.getmembers():
                if member.name != "blob.bin":
                    tar.addfile(member, small.extractfile(member))
        info = tarfile.TarInfo("blob.bin")
        info.size = len(blob)
        tar.addfile(info, io.BytesIO(blob))
    assert upload(api, raw.getvalue()).status_code == 201


def test_finding_uploads_over_the_body_limit_get_a_json_413(api, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    response = upload(api, os.urandom(20_000))
    assert response.status_code == 413
    assert response["Content-Type"] == "application/json"
    assert "10000-byte limit" in response.json()["errors"]["body"][0]


# --- metrics ----------------------------------------------------------------------------------


def post_reports(api, trial, reports):
    return api.post(f"/api/v1/trials/{trial.id}/metrics/", {"reports": reports}, format="json")


def test_finding_100k_metric_names_in_one_report_are_refused(api, trial, settings):
    metrics = {f"m{i}": 1.0 for i in range(settings.HEADWAY_MAX_METRIC_NAMES_PER_REPORT + 1)}
    response = post_reports(
        api, trial, [{"group": "training", "steps_completed": 1, "metrics": metrics}]
    )
    assert response.status_code == 400
    assert "reports[0].metrics" in response.json()["errors"]


def test_finding_100k_metric_names_series_per_trial_are_bounded(api, trial, settings):
    settings.HEADWAY_MAX_METRIC_SERIES_PER_TRIAL = 5
    first = {f"a{i}": 1.0 for i in range(4)}
    assert (
        post_reports(
            api, trial, [{"group": "training", "steps_completed": 1, "metrics": first}]
        ).status_code
        == 200
    )
    more = {f"b{i}": 1.0 for i in range(2)}
    response = post_reports(
        api, trial, [{"group": "training", "steps_completed": 2, "metrics": more}]
    )
    assert response.status_code == 400 and "reports" in response.json()["errors"]
    again = post_reports(
        api, trial, [{"group": "training", "steps_completed": 3, "metrics": first}]
    )
    assert again.status_code == 200  # known series are still reported
    # A series is a (group, name): training's names are new in validation.
    other_group = post_reports(
        api, trial, [{"group": "validation", "steps_completed": 3, "metrics": {"a0": 1.0}}]
    )
    assert other_group.status_code == 200  # 4 + 1 = 5 series: at the limit
    over = post_reports(
        api, trial, [{"group": "validation", "steps_completed": 4, "metrics": {"a1": 1.0}}]
    )
    assert over.status_code == 400
    assert "adds 1 to 5" in over.json()["errors"]["reports"][0]


def test_finding_postgresql_nul_in_a_metric_is_refused_and_loses_nothing_else(api, trial):
    good = [{"group": "training", "steps_completed": s, "metrics": {"loss": 1.0}} for s in range(5)]
    for bad in ({"note": "a\x00b"}, {"a\x00b": 1.0}, {"nested": {"k": ["\x00"]}}):
        response = post_reports(
            api, trial, [{"group": "training", "steps_completed": 9, "metrics": bad}]
        )
        assert response.status_code == 400, bad
        assert "NUL" in next(iter(response.json()["errors"].values()))[0]
    assert post_reports(api, trial, good).status_code == 200
    trial.refresh_from_db()
    assert trial.summary_metrics["training"]["loss"]["count"] == 5


# --- logs -------------------------------------------------------------------------------------


def test_finding_postgresql_nul_on_trial_stdout_is_stored(host_agent, user):
    from headway.exec.loglines import read_lines
    from registry.models import TrialLog
    from tests.helpers import TINY_CONFIG, TINY_MODEL
    from tests.helpers_agent import trial_on_agent
    from workers.run_loop import LogWriter

    trial = trial_on_agent(host_agent, user, TINY_CONFIG, TINY_MODEL)
    writer = LogWriter(trial.id, trial.run_id)  # the host's writer, over REST
    for line in read_lines(io.StringIO("before\nnul \x00 here\nafter\n"), 100):
        writer.add(line)
    writer.add("[headway] message with \x00")
    writer.flush()  # PostgreSQL refuses "\x00" in text: this insert used to fail every time
    stored = list(TrialLog.objects.filter(trial=trial).values_list("message", flat=True))
    assert stored == ["before", "nul \ufffd here", "after", "[headway] message with \ufffd"]


def test_finding_unlimited_log_line_length_is_cut():
    from headway.exec.loglines import read_lines

    stream = io.StringIO("a" * 1_000_000 + "\nshort\n" + "b" * 1500 + "\n" + "c" * 1000 + "\nend")
    lines = list(read_lines(stream, 1000))
    assert lines == [
        "a" * 974 + "… [999026 characters cut]",
        "short",
        "b" * 977 + "… [523 characters cut]",
        "c" * 1000,
        "end",
    ]


# --- checkpoints ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["../escape", "/etc/passwd", "", "a\x00b", "a//b", "./a"])
def test_finding_checkpoint_file_names_are_checked(api, trial, name):
    body = {"uuid": str(uuid.uuid4()), "steps_completed": 1, "resources": {name: 1}}
    response = api.post(f"/api/v1/trials/{trial.id}/checkpoints/", body, format="json")
    assert response.status_code == 400
    assert any(key.startswith("resources") for key in response.json()["errors"])


def test_finding_checkpoint_file_names_count_is_bounded(api, trial, settings):
    settings.HEADWAY_MAX_CHECKPOINT_FILES = 3
    files = {f"f{i}": 1 for i in range(4)}
    body = {"uuid": str(uuid.uuid4()), "steps_completed": 1, "resources": files}
    response = api.post(f"/api/v1/trials/{trial.id}/checkpoints/", body, format="json")
    assert response.status_code == 400 and "resources" in response.json()["errors"]


def test_finding_symlinked_checkpoint_folder_is_not_served(api, tmp_path):
    from tests.helpers_checkpoints import store_over_rest, trial_on_storage

    root = tmp_path / "checkpoints"
    trial = trial_on_storage(api, {"type": "shared_fs", "host_path": str(root)})
    whole = store_over_rest(api, trial, {"model.pt": b"w"}, 1)
    nested = store_over_rest(api, trial, {"model.pt": b"w", "sub/x": b"x"}, 2)
    # What trial code can do to the shared folder after registering:
    for path in (root / whole).iterdir():
        path.unlink()
    (root / whole).rmdir()
    (root / whole).symlink_to("/etc")
    (root / nested / "sub" / "x").unlink()
    (root / nested / "sub").rmdir()
    (root / nested / "sub").symlink_to("/etc")
    for storage_id, path in ((whole, "passwd"), (nested, "sub/passwd")):
        response = api.get(f"/api/v1/checkpoints/{storage_id}/download", {"path": path})
        assert response.status_code in (400, 404, 410), response
        assert b"root:" not in b"".join(getattr(response, "streaming_content", [response.content]))
    whole_tar = api.get(f"/api/v1/checkpoints/{whole}/download")
    assert whole_tar.status_code in (400, 404, 410)
    tar = api.get(f"/api/v1/checkpoints/{nested}/download")
    assert b"root:" not in b"".join(getattr(tar, "streaming_content", [tar.content]))


def test_finding_postgresql_nul_in_a_metric_fails_where_the_sdk_reports_it():
    from headway.core._metrics import json_safe_metrics

    for bad in ({"note": "a\x00b"}, {"a\x00b": 1.0}, {"nested": {"k\x00": 1}}):
        with pytest.raises(ValueError, match="NUL"):
            json_safe_metrics(bad)
    assert json_safe_metrics({"note": "fine", "n": 1}) == {"note": "fine", "n": 1}
