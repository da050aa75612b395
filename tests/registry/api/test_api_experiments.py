"""REST: creating experiments, and every kind of bad input answering 4xx with nothing stored."""

import io
import tarfile

import pytest

from registry.models import Experiment, RunState, Trial, TrialRun
from tests.helpers import TINY_CONFIG, TINY_MODEL, create_experiment, make_tar_gz

pytestmark = pytest.mark.django_db


def assert_nothing_stored():
    assert Experiment.objects.count() == 0
    assert Trial.objects.count() == 0


def test_it_creates_an_experiment_with_one_queued_trial(api):
    response = create_experiment(api)
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["name"] == "tiny" and body["state"] == "ACTIVE" and body["num_trials"] == 1
    # Server-side defaults are filled in and stored with the experiment.
    assert body["config"]["checkpoint_storage"]["type"] == "shared_fs"
    assert body["config"]["checkpoint_storage"]["host_path"]
    assert isinstance(body["config"]["reproducibility"]["experiment_seed"], int)
    trial = Trial.objects.get(experiment_id=body["id"])
    assert 1e-3 <= trial.hparams["lr"] <= 1e-1 and trial.hparams["global_batch_size"] == 8
    run = TrialRun.objects.get(trial=trial)
    assert run.run_id == 1 and run.state == RunState.QUEUED and len(run.token) == 40


def test_it_lists_and_describes(api):
    experiment_id = create_experiment(api).json()["id"]
    listing = api.get("/api/v1/experiments/").json()
    assert listing["count"] == 1 and listing["results"][0]["id"] == experiment_id
    described = api.get(f"/api/v1/experiments/{experiment_id}/").json()
    assert described["id"] == experiment_id
    config = described["config"]["searcher"]
    assert (described["searcher_name"], described["searcher_metric"]) == (
        config["name"],
        config["metric"],
    )
    trials = api.get(f"/api/v1/experiments/{experiment_id}/trials/").json()["results"]
    assert len(trials) == 1 and trials[0]["run_state"] == "QUEUED"
    archive = api.get(f"/api/v1/experiments/{experiment_id}/model_definition")
    assert archive.status_code == 200 and b"".join(archive) == TINY_MODEL


def test_it_accepts_the_config_as_an_object(api):
    config = {
        "entrypoint": "python train.py",
        "searcher": {"name": "single", "metric": "loss", "max_length": 5},
    }
    response = create_experiment(api, config=config)
    assert response.status_code == 201, response.json()
    assert response.json()["config"]["searcher"]["max_length"] == {"batches": 5}


@pytest.mark.parametrize(
    ("config", "field", "words"),
    [
        ("name: [unclosed", "config", ["line"]),
        (TINY_CONFIG + "bogus_field: 1\n", "config.bogus_field", ["bogus_field", "searcher"]),
        (
            TINY_CONFIG.replace(
                "{type: log, minval: -3, maxval: -1}", "{type: int, minval: 0.5, maxval: 3}"
            ),
            "config.hyperparameters.lr.minval",
            [],
        ),
        (TINY_CONFIG.replace("name: single", "name: nope"), "config.searcher.name", ["single"]),
    ],
    ids=["malformed-yaml", "unknown-field", "wrong-hparam-type", "bad-searcher"],
)
def test_it_rejects_bad_config(api, config, field, words):
    response = create_experiment(api, config=config)
    assert response.status_code == 400
    body = response.json()
    assert field in body["errors"], body
    text = " ".join(body["errors"][field])
    assert all(word in text for word in words), text
    assert_nothing_stored()


def test_it_rejects_a_missing_entrypoint_class(api):
    model = make_tar_gz({"model_def.py": "class SomethingElse:\n    pass\n"})
    response = create_experiment(api, model=model)
    assert response.status_code == 400
    assert "TinyTrial" in response.json()["errors"]["config.entrypoint"][0]
    assert_nothing_stored()


def test_it_rejects_a_missing_entrypoint_module(api):
    response = create_experiment(api, model=make_tar_gz({"other.py": "x = 1\n"}))
    assert response.status_code == 400
    assert "model_def.py" in response.json()["errors"]["config.entrypoint"][0]
    assert_nothing_stored()


def _tar_with(member: tarfile.TarInfo, data: bytes = b"") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo("model_def.py")
        source = b"class TinyTrial: pass\n"
        info.size = len(source)
        tar.addfile(info, io.BytesIO(source))
        member.size = len(data)
        tar.addfile(member, io.BytesIO(data) if data else None)
    return buf.getvalue()


def _symlink(name: str, target: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.SYMTYPE
    info.linkname = target
    return info


@pytest.mark.parametrize(
    ("archive", "words"),
    [
        (_tar_with(tarfile.TarInfo("../escape.py"), b"x"), "'..'"),
        (_tar_with(tarfile.TarInfo("/etc/evil.py"), b"x"), "absolute"),
        (_tar_with(_symlink("link", "/etc/passwd")), "link"),
        (_tar_with(_symlink("inner", "model_def.py")), "link"),
        (b"definitely not a tarball", "not a valid tar.gz"),
    ],
    ids=["dotdot", "absolute", "symlink-out", "symlink-in", "garbage"],
)
def test_it_rejects_unsafe_model_definitions(api, archive, words):
    response = create_experiment(api, model=archive)
    assert response.status_code == 400
    assert words in response.json()["errors"]["model_definition"][0]
    assert_nothing_stored()


def test_it_rejects_oversize_model_definitions(api, settings):
    settings.HEADWAY_MAX_MODEL_DEF_BYTES = 1000
    response = create_experiment(
        api,
        model=make_tar_gz({"model_def.py": "class TinyTrial: pass\n", "big": b"\x00" * 1})
        + b"\x00" * 2000,
    )
    assert response.status_code == 413
    assert "limit" in response.json()["detail"]
    assert_nothing_stored()


def test_it_rejects_a_non_base64_model_definition(api):
    response = api.post(
        "/api/v1/experiments/", {"config": TINY_CONFIG, "model_definition": "%%%"}, format="json"
    )
    assert response.status_code == 400
    assert "model_definition" in response.json()["errors"]
    assert_nothing_stored()


def test_it_requires_a_token(client):
    assert client.get("/api/v1/experiments/").status_code in (401, 403)
    assert client.get("/healthz").status_code == 200


def test_it_serves_the_openapi_schema(api):
    response = api.get("/api/v1/schema/")
    assert response.status_code == 200
    assert b"/api/v1/trials/{id}/metrics/" in response.content


def test_a_trial_token_is_scoped_to_its_trial(api):
    first = create_experiment(api).json()["id"]
    second = create_experiment(api).json()["id"]
    run = TrialRun.objects.get(trial__experiment_id=first)
    other = Trial.objects.get(experiment_id=second)
    api.credentials(HTTP_AUTHORIZATION=f"Token {run.token}")
    assert api.get(f"/api/v1/trials/{run.trial_id}/").status_code == 200
    assert api.get(f"/api/v1/trials/{other.id}/").status_code == 403
    assert api.get("/api/v1/experiments/").status_code == 403
    denied = api.post(
        f"/api/v1/trials/{other.id}/metrics/",
        {"reports": [{"group": "training", "steps_completed": 1, "metrics": {"loss": 1}}]},
        format="json",
    )
    assert denied.status_code == 403
