"""The AWS cloud-config file (`--cloud-config`), in the INI form Kubernetes' AWS config uses.

```ini
[Global]
Zone = eu-west-1a          ; the region is the zone without its last letter
; Region = eu-west-1       ; or give the region directly

[ServiceOverride "1"]
Service = autoscaling      ; autoscaling | ec2 | eks
Region = eu-west-1
URL = https://autoscaling.eu-west-1.amazonaws.com
SigningRegion = eu-west-1
```

The region comes from, in order: `AWS_REGION`, `AWS_DEFAULT_REGION`, `[Global] Region`,
`[Global] Zone`. Endpoints not overridden here follow boto3's own resolution, which honours
`AWS_ENDPOINT_URL` and `AWS_ENDPOINT_URL_<SERVICE>` (e.g. `AWS_ENDPOINT_URL_AUTO_SCALING`).
"""

from __future__ import annotations

import configparser
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from clusterscaler.api import ConfigurationError, describe_value, read_cloud_config

SERVICES = ("autoscaling", "ec2", "eks")


@dataclass(frozen=True, slots=True)
class ServiceOverride:
    """An endpoint override for one service in one region."""

    service: str
    region: str
    url: str
    signing_region: str = ""


@dataclass(frozen=True, slots=True)
class CloudConfig:
    region: str = ""
    zone: str = ""
    overrides: tuple[ServiceOverride, ...] = field(default_factory=tuple)

    def endpoint_for(self, service: str, region: str) -> ServiceOverride | None:
        for override in self.overrides:
            if override.service == service and override.region == region:
                return override
        return None


def _ini_error(exc: configparser.Error) -> str:
    """What configparser found wrong, on one line, the line it quotes bounded (its own
    message quotes every bad line whole)."""
    if isinstance(exc, configparser.MissingSectionHeaderError):
        return (
            f"line {exc.lineno}: expected a [section] header before any key, got "
            f"{describe_value(exc.line.rstrip(chr(10)))}"
        )
    if isinstance(exc, configparser.DuplicateOptionError):
        return (
            f"line {exc.lineno}: key {describe_value(exc.option)} given twice in section "
            f"{describe_value(exc.section)}"
        )
    if isinstance(exc, configparser.DuplicateSectionError):
        return f"line {exc.lineno}: section {describe_value(exc.section)} given twice"
    if isinstance(exc, configparser.ParsingError) and exc.errors:
        lineno, line = exc.errors[0]
        # configparser keeps each bad line as its repr: bounded as a value would be.
        shown = line if len(line) <= 200 else f"{line[:200]}... ({len(line)} characters)"
        more = len(exc.errors) - 1
        return (
            f"line {lineno}: expected `key = value`, a [section] header or a comment, got "
            f"{shown}" + (f" (and {more} more bad lines)" if more else "")
        )
    return describe_value(str(exc))


def parse_cloud_config(text: str, source: str = "cloud-config") -> CloudConfig:
    """Parse the INI text of a cloud-config. `source` names the file in errors."""
    # Values are literal in the Kubernetes format (gcfg): no `%` interpolation (`REGION=%`
    # escaped as InterpolationSyntaxError). Keys are case-insensitive, as configparser's.
    parser = configparser.ConfigParser(
        inline_comment_prefixes=(";", "#"), strict=True, interpolation=None
    )
    try:
        parser.read_string(text, source=source)
    except configparser.Error as exc:
        raise ConfigurationError(
            f"{source}: not a valid INI cloud-config: {_ini_error(exc)}"
        ) from exc
    region = ""
    zone = ""
    overrides: list[ServiceOverride] = []
    for section in parser.sections():
        values = parser[section]
        if section.lower() == "global":
            region = values.get("region", "").strip()
            zone = values.get("zone", "").strip()
            continue
        if section.lower().startswith("serviceoverride"):
            overrides.append(_parse_override(source, section, values))
    return CloudConfig(region=region, zone=zone, overrides=tuple(overrides))


def _parse_override(source: str, section: str, values: Mapping[str, str]) -> ServiceOverride:
    missing = [key for key in ("service", "region", "url") if not values.get(key, "").strip()]
    if missing:
        raise ConfigurationError(
            f"{source}: section [{section}] lacks {', '.join(sorted(missing))}; expected "
            "Service, Region and URL (and optionally SigningRegion)"
        )
    service = values["service"].strip().lower()
    if service not in SERVICES:
        raise ConfigurationError(
            f"{source}: section [{section}] field Service={describe_value(values['service'])}; expected one "
            f"of {', '.join(SERVICES)}"
        )
    return ServiceOverride(
        service=service,
        region=values["region"].strip(),
        url=values["url"].strip(),
        signing_region=values.get("signingregion", "").strip(),
    )


def load_cloud_config(path: str) -> CloudConfig:
    """Read `--cloud-config`; an empty path means no file."""
    text = read_cloud_config(path)
    return CloudConfig() if text is None else parse_cloud_config(text, source=path)


def resolve_region(config: CloudConfig, environ: Mapping[str, str] | None = None) -> str:
    """The AWS region to use, or a `ConfigurationError` saying where to set it."""
    env = os.environ if environ is None else environ
    for candidate in (
        env.get("AWS_REGION", ""),
        env.get("AWS_DEFAULT_REGION", ""),
        config.region,
        zone_to_region(config.zone) if config.zone else "",
    ):
        if candidate.strip():
            return candidate.strip()
    raise ConfigurationError(
        "aws provider: no region; set AWS_REGION (or AWS_DEFAULT_REGION), or Region or Zone "
        "in the [Global] section of --cloud-config"
    )


def zone_to_region(zone: str) -> str:
    """`us-east-1a` -> `us-east-1` (availability zones are the region plus one letter)."""
    if len(zone) < 2 or not zone[-1].isalpha():
        raise ConfigurationError(
            f"availability zone {describe_value(zone)}: expected a region followed by a letter, e.g. us-east-1a"
        )
    return zone[:-1]
