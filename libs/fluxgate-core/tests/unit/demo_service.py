"""A service for the lifecycle tests: ``python demo_service.py`` runs it under run_service."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import Literal

from pydantic_settings import BaseSettings

from fluxgate_core.errors import DeliveryError
from fluxgate_core.lifecycle import run_service
from fluxgate_core.settings import HttpSettings, LogSettings, service_config


class DemoSettings(BaseSettings):
    model_config = service_config("DEMO_")
    http: HttpSettings = HttpSettings(host="127.0.0.1", port=0)
    log: LogSettings = LogSettings()
    mode: Literal["clean", "raise", "fatal", "stuck", "self-term"] = "clean"


class DemoService:
    def __init__(self, settings: DemoSettings) -> None:
        self.mode = settings.mode
        self.fatal: BaseException | None = None
        self.drained = False
        self.up = False

    def ready(self) -> bool:
        return self.up

    async def run(self, stop: asyncio.Event) -> None:
        self.up = True
        if self.mode == "raise":
            raise DeliveryError("kafka said no")
        if self.mode == "fatal":
            self.fatal = DeliveryError("a record nothing takes")
            stop.set()
        if self.mode == "self-term":
            os.kill(os.getpid(), signal.SIGTERM)
        await stop.wait()
        print("draining", flush=True)
        if self.mode == "stuck":
            await asyncio.Event().wait()  # never drains: only a second signal ends it
        self.drained = True


if __name__ == "__main__":
    sys.exit(run_service("demo", DemoSettings, DemoService))
