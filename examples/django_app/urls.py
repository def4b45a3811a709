"""The example's pages: ``/`` (the runs so far) and ``POST /export/<table>`` (ask for one)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import path
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from jobsapp.jobs import export, scheduler


def home(request: HttpRequest) -> HttpResponse:
    runs = [
        {"job": r.job, "state": str(r.state.value), "node": r.node}
        for r in scheduler.history(limit=20)
    ]
    return JsonResponse({"runs": runs, "jobs": [job.name for job in scheduler.jobs]})


@csrf_exempt  # an example API endpoint; a real one has its own authentication
@require_POST
def ask_export(request: HttpRequest, table: str) -> HttpResponse:
    return JsonResponse({"queue_id": export.submit(table=table)}, status=202)


urlpatterns = [path("", home), path("export/<str:table>", ask_export)]
