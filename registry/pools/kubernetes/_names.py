"""Kubernetes' name, label and quantity rules, as the API server applies them.

The rules are those of Kubernetes' apimachinery validation (``IsDNS1123Label``,
``IsDNS1123Subdomain``, ``IsQualifiedName``, ``IsValidLabelValue``) and of its resource
quantities (``resource.Quantity``); checking them here turns a typo in the pool file into a
start-up error naming the field, instead of every run's Job refused by the API server.
"""

from __future__ import annotations

import re
from decimal import Decimal

# RFC 1123 label: lower-case alphanumerics and '-', starting and ending alphanumeric, <= 63.
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
# A label value: empty, or alphanumerics, '-', '_', '.', starting and ending alphanumeric, <= 63.
_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?")
# The name part of a qualified name (label and annotation keys, node selector keys).
_QUALIFIED_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
# Quantities: a decimal number with an optional binary (Ki..Ei) or decimal (m, k, M..E) suffix.
# Exponent forms (1e3) are valid Kubernetes but refused here: no pool needs them.
_QUANTITY = re.compile(r"(?P<number>[0-9]+(\.[0-9]+)?)(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)?")


def check_dns_label(value: str, what: str = "name") -> str:
    """Return ``value`` if it is an RFC 1123 label (a namespace, Service or Job name).

    Raises:
        ValueError: naming the rule.
    """
    if len(value) > 63 or not _DNS_LABEL.fullmatch(value):
        raise ValueError(
            f"{value!r} is not a valid Kubernetes {what} (RFC 1123 label: at most 63 lower-case "
            "letters, digits or '-', starting and ending with a letter or digit)"
        )
    return value


def check_dns_subdomain(value: str, what: str = "name") -> str:
    """Return ``value`` if it is an RFC 1123 subdomain (a Secret, ServiceAccount or PVC name).

    Raises:
        ValueError: naming the rule.
    """
    if len(value) > 253 or not all(_DNS_LABEL.fullmatch(part) for part in value.split(".")):
        raise ValueError(
            f"{value!r} is not a valid Kubernetes {what} (RFC 1123 subdomain: at most 253 "
            "lower-case letters, digits, '-' or '.', each part starting and ending with a "
            "letter or digit)"
        )
    return value


def check_qualified_name(value: str, what: str = "key") -> str:
    """Return ``value`` if it is a qualified name: ``[prefix/]name``, the prefix an RFC 1123
    subdomain, the name at most 63 characters (label keys, node selector keys, resource names).

    Raises:
        ValueError: naming the rule.
    """
    prefix, slash, name = value.rpartition("/")
    ok = len(name) <= 63 and bool(_QUALIFIED_NAME.fullmatch(name))
    if slash:
        try:
            check_dns_subdomain(prefix)
        except ValueError:
            ok = False
    if not ok:
        raise ValueError(
            f"{value!r} is not a valid Kubernetes {what} ([prefix/]name: the prefix a DNS "
            "subdomain, the name at most 63 letters, digits, '-', '_' or '.', starting and "
            "ending with a letter or digit)"
        )
    return value


def check_label_value(value: str, what: str = "label value") -> str:
    """Return ``value`` if it is a valid label value (at most 63 characters; see module).

    Raises:
        ValueError: naming the rule.
    """
    if len(value) > 63 or not _LABEL_VALUE.fullmatch(value):
        raise ValueError(
            f"{value!r} is not a valid Kubernetes {what} (at most 63 letters, digits, '-', "
            "'_' or '.', starting and ending with a letter or digit)"
        )
    return value


def check_quantity(value: str) -> str:
    """Return ``value`` if it is a resource quantity Headway can scale (``500m``, ``8``,
    ``64Gi``, ``1.5``).

    Raises:
        ValueError: naming the forms accepted.
    """
    if not _QUANTITY.fullmatch(value):
        raise ValueError(
            f"{value!r} is not a Kubernetes quantity (a number with an optional suffix: "
            "m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei; e.g. 500m, 8, 64Gi)"
        )
    return value


def scale_quantity(value: str, times: int) -> str:
    """``value`` (a quantity ``check_quantity`` accepts) ``times`` over, in the same suffix:
    ``scale_quantity("500m", 4) == "2000m"``, ``scale_quantity("1.5Gi", 2) == "3Gi"``.

    Raises:
        ValueError: ``value`` is not such a quantity, or ``times`` is below 1.
    """
    match = _QUANTITY.fullmatch(value)
    if match is None or times < 1:
        raise ValueError(f"cannot scale quantity {value!r} by {times}")
    number = Decimal(match["number"]) * times
    text = format(number.normalize(), "f") if number != number.to_integral() else str(int(number))
    return text + (match["suffix"] or "")
