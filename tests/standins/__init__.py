"""The stand-ins the package ships (increcrawl_scrapy.testing): the Geonode API
stand-in and the sample site."""
