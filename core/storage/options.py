"""Object-store settings passed once: ``StreamExecutionEnvironment(storage_options=...)``.

Credentials and endpoints are given on the environment, never in every URI: the driver
opens checkpoints, the job folder and sinks with them, and the job's plan and sinks carry
them to the executors inside Spark's task (not through their environment, which a cluster
manager fixes when it starts them). Keys follow the ``object_store`` names that deltalake
and polars already take (``aws_access_key_id``...); each library gets them in its own
spelling (``filesystem``, ``for_deltalake``, ``for_pyiceberg``). Secrets never show in a
``repr``, an error or a file flintlock writes.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from urllib.parse import urlsplit

import pyarrow.fs as pafs

from flintlock.core.errors import GraphError

S3_KEYS = {
    "aws_access_key_id": "access_key",
    "aws_secret_access_key": "secret_key",
    "aws_session_token": "session_token",
    "aws_region": "region",
    "aws_endpoint_url": "endpoint_override",
}
"""The keys of S3's settings, and the ``pyarrow.fs.S3FileSystem`` argument each becomes."""
SECRET_KEYS = frozenset({"aws_secret_access_key", "aws_session_token"})
"""Keys whose values are shown as ``***``."""
ICEBERG_KEYS = {
    "aws_access_key_id": "s3.access-key-id",
    "aws_secret_access_key": "s3.secret-access-key",
    "aws_session_token": "s3.session-token",
    "aws_region": "s3.region",
    "aws_endpoint_url": "s3.endpoint",
}
"""pyiceberg's FileIO property for each key."""
S3_SCHEMES = ("s3", "s3a")


class StorageOptions(Mapping[str, str]):
    """An immutable mapping of object-store settings whose secrets never print.

    Keys are case-insensitive (``AWS_ACCESS_KEY_ID`` is ``aws_access_key_id``, as
    deltalake reads them); an unknown key is an error that lists the known ones, not a
    setting silently ignored."""

    def __init__(self, options: Mapping[str, str] | None = None) -> None:
        settings: dict[str, str] = {}
        for key, value in (options or {}).items():
            name = str(key).lower()
            if name not in S3_KEYS:
                raise GraphError(
                    f"storage_options: unknown key {key!r}; flintlock knows "
                    f"{', '.join(sorted(S3_KEYS))} (S3 and S3-compatible stores; other "
                    f"stores take their settings from the URI or the environment)"
                )
            if not isinstance(value, str) or not value:
                raise GraphError(
                    f"storage_options: {name} must be a non-empty str, not {type(value).__name__}"
                )
            settings[name] = value
        endpoint = settings.get("aws_endpoint_url")
        if endpoint is not None and urlsplit(endpoint).scheme not in ("http", "https"):
            raise GraphError(
                f"storage_options: aws_endpoint_url {endpoint!r} must be a URL with its "
                f"scheme (http://host:port or https://host)"
            )
        self._settings = settings

    def __getitem__(self, key: str) -> str:
        return self._settings[key.lower()]

    def __iter__(self) -> Iterator[str]:
        return iter(self._settings)

    def __len__(self) -> int:
        return len(self._settings)

    def __hash__(self) -> int:  # immutable: a dataclass field's default may be one
        return hash(frozenset(self._settings.items()))

    def __repr__(self) -> str:
        shown = ", ".join(f"{key}={self.shown(key)!r}" for key in sorted(self._settings))
        return f"StorageOptions({shown})"

    __str__ = __repr__

    def has_secrets(self) -> bool:
        """Whether any value is a secret (a key, a token)."""
        return any(key in SECRET_KEYS for key in self._settings)

    def shown(self, key: str) -> str:
        """The value of ``key`` as flintlock shows it: ``***`` for a secret."""
        return "***" if key in SECRET_KEYS else self._settings[key]

    def merged_for_deltalake(self, own: Mapping[str, str] | None) -> dict[str, str] | None:
        """deltalake's ``storage_options`` of a sink or source: these, then its own
        (lower-cased, as delta-rs reads keys), which win; None when there are none."""
        merged = {**self.for_deltalake(), **{k.lower(): v for k, v in (own or {}).items()}}
        return merged or None

    # ---- per library ----

    def filesystem(self, uri: str) -> tuple[pafs.FileSystem, str]:
        """The pyarrow file system and path of ``uri``: with these settings for an
        ``s3://`` URI that carries none itself, else as ``pyarrow.fs`` reads the URI."""
        parts = urlsplit(uri)
        if not self._settings or parts.scheme not in S3_SCHEMES:
            filesystem: pafs.FileSystem
            filesystem, path = pafs.FileSystem.from_uri(uri)
            return filesystem, path
        if "@" in parts.netloc or parts.query:
            raise GraphError(
                f"{redact_uri(uri)} carries credentials or options of its own while "
                f"storage_options are given too: pass them once, in storage_options"
            )
        bucket_path = f"{parts.netloc}/{parts.path.lstrip('/')}".rstrip("/")
        return pafs.S3FileSystem(**self.pyarrow_s3_arguments()), bucket_path

    def pyarrow_s3_arguments(self) -> dict[str, str]:
        """The ``pyarrow.fs.S3FileSystem`` keyword arguments of these settings."""
        arguments: dict[str, str] = {
            S3_KEYS[key]: value for key, value in self._settings.items() if key in S3_KEYS
        }
        endpoint = self._settings.get("aws_endpoint_url")
        if endpoint is not None:
            parts = urlsplit(endpoint)
            arguments["endpoint_override"] = parts.netloc
            arguments["scheme"] = parts.scheme
        return arguments

    def for_deltalake(self) -> dict[str, str]:
        """deltalake's ``storage_options``: the same keys, and plain HTTP allowed when
        the endpoint is ``http://`` (delta-rs refuses it otherwise)."""
        options = dict(self._settings)
        if options.get("aws_endpoint_url", "").startswith("http://"):
            options["aws_allow_http"] = "true"
        return options

    def for_pyiceberg(self) -> dict[str, str]:
        """pyiceberg's FileIO properties (``s3.endpoint``, ``s3.access-key-id``...)."""
        return {ICEBERG_KEYS[key]: value for key, value in self._settings.items()}


NO_OPTIONS = StorageOptions()


def redact_uri(uri: str) -> str:
    """``uri`` without the secret a URI may carry (``s3://key:secret@bucket``)."""
    parts = urlsplit(uri)
    if "@" not in parts.netloc:
        return uri.split("?", 1)[0]
    user, _, host = parts.netloc.rpartition("@")
    shown = f"{user.split(':', 1)[0]}:***@{host}"
    return parts._replace(netloc=shown, query="").geturl()
