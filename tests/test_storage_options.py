"""``storage_options=`` on the environment (issue 34): object-store settings given once,
shown without their secrets, mapped to each library's own keys, and opening checkpoint
storage on a real S3 server (moto's, on loopback) from plain ``s3://bucket/path`` URIs."""

from __future__ import annotations

import pytest
from s3_server import S3Server

from flintlock import StreamExecutionEnvironment
from flintlock.core.checkpoint.storage import CheckpointStorage
from flintlock.errors import GraphError
from flintlock.plugin_api import StorageOptions
from flintlock.sinks.files import FileSink

SECRET = "s3cr3t-that-must-not-show"
OPTIONS = {
    "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
    "aws_secret_access_key": SECRET,
    "aws_session_token": "token-that-must-not-show",
    "aws_endpoint_url": "http://127.0.0.1:9000",
    "aws_region": "eu-west-1",
}


def test_secrets_never_show_in_the_options_repr() -> None:
    options = StorageOptions(OPTIONS)
    shown = f"{options!r} {options}"
    assert SECRET not in shown and "token-that-must-not-show" not in shown
    assert "aws_access_key_id='AKIDEXAMPLE'" in shown
    assert "aws_secret_access_key='***'" in shown and "aws_session_token='***'" in shown
    assert options["AWS_SECRET_ACCESS_KEY"] == SECRET  # keys are case-insensitive


def test_each_library_gets_the_settings_in_its_own_keys() -> None:
    options = StorageOptions(OPTIONS)
    assert options.pyarrow_s3_arguments() == {
        "access_key": "AKIDEXAMPLE",
        "secret_key": SECRET,
        "session_token": "token-that-must-not-show",
        "endpoint_override": "127.0.0.1:9000",
        "scheme": "http",
        "region": "eu-west-1",
    }
    assert options.for_deltalake() == {
        "aws_access_key_id": "AKIDEXAMPLE",
        "aws_secret_access_key": SECRET,
        "aws_session_token": "token-that-must-not-show",
        "aws_endpoint_url": "http://127.0.0.1:9000",
        "aws_region": "eu-west-1",
        "aws_allow_http": "true",  # delta-rs refuses http:// endpoints otherwise
    }
    assert options.for_pyiceberg() == {
        "s3.access-key-id": "AKIDEXAMPLE",
        "s3.secret-access-key": SECRET,
        "s3.session-token": "token-that-must-not-show",
        "s3.endpoint": "http://127.0.0.1:9000",
        "s3.region": "eu-west-1",
    }
    https = StorageOptions({"aws_endpoint_url": "https://s3.example.com"})
    assert "aws_allow_http" not in https.for_deltalake()


def test_a_sinks_own_options_win_key_by_key() -> None:
    options = StorageOptions(OPTIONS)
    merged = options.merged_for_deltalake({"AWS_REGION": "us-east-2", "conditional_put": "etag"})
    assert merged is not None
    assert merged["aws_region"] == "us-east-2" and merged["conditional_put"] == "etag"
    assert merged["aws_secret_access_key"] == SECRET
    assert StorageOptions().merged_for_deltalake(None) is None


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"aws_secret_key": "x"}, "unknown key 'aws_secret_key'; flintlock knows aws_"),
        ({"aws_region": ""}, "aws_region must be a non-empty str"),
        ({"aws_endpoint_url": "127.0.0.1:9000"}, "must be a URL with its scheme"),
    ],
)
def test_a_wrong_option_is_refused_when_the_environment_is_made(
    options: dict[str, str], words: str
) -> None:
    with pytest.raises(GraphError, match="storage_options") as caught:
        StreamExecutionEnvironment(parallelism=1, storage_options=options)
    assert words in str(caught.value)


def test_a_uri_with_credentials_of_its_own_is_refused_before_spark(s3: S3Server) -> None:
    env = StreamExecutionEnvironment(
        parallelism=1,
        checkpoint_dir=s3.uri("chk"),  # carries keys and an endpoint itself
        storage_options=s3.storage_options(SECRET),
        master="not-a-master://never-started",
    )
    env.from_collection([{"a": 1}]).sink_to(FileSink(s3.plain_uri("out")))
    with pytest.raises(GraphError, match="pass them once, in storage_options") as caught:
        env.execute("twice")
    assert "testing:***@" in str(caught.value) and SECRET not in str(caught.value)


def test_checkpoint_storage_opens_a_plain_s3_uri_with_the_options(
    s3: S3Server, s3_folder: str
) -> None:
    options = StorageOptions(s3.storage_options(SECRET))
    storage = CheckpointStorage.from_uri(s3.plain_uri(f"{s3_folder}/chk"), options)
    assert storage.uri(storage.job_dir("orders")) == s3.plain_uri(f"{s3_folder}/chk/orders")
    path = f"{storage.job_dir('orders')}/note.json"
    assert storage.create_json_once(path, {"n": 1})  # If-None-Match through boto3
    assert not storage.create_json_once(path, {"n": 2})
    assert storage.read_json(path) == {"n": 1}
    seen = s3.filesystem().get_file_info(f"flintlock-tests/{s3_folder}/chk/orders/note.json")
    assert seen.size == len(b'{\n "n": 1\n}')
    assert storage.options == options  # a savepoint folder on the store opens with them
