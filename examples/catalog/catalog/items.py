"""The same page as each kind of item itemadapter knows (``-a item=...``)."""

from __future__ import annotations

import dataclasses

import attr
import scrapy


class PageItem(scrapy.Item):
    url = scrapy.Field()
    title = scrapy.Field()
    text = scrapy.Field()


@dataclasses.dataclass
class PageData:
    url: str
    title: str
    text: str


@attr.s(auto_attribs=True)
class PageAttrs:
    url: str
    title: str
    text: str


def make(kind: str, **fields: str):
    if kind == "dict":
        return fields
    return {"item": PageItem, "dataclass": PageData, "attrs": PageAttrs}[kind](**fields)
