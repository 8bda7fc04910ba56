"""Claims only, as a dict."""

spec = {
    "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "four-gpus"}],
    "containers": [{"name": "trainer", "resources": {"claims": [{"name": "gpus"}], "limits": {"cpu": "8"}}}],
}
