"""The Captioner replica's pixel budget (conceptual.serve.captioner_deployment.PixelBudget):
a semaphore weighted by pixels, first come first served, whose reservations can shrink."""

from __future__ import annotations

import asyncio

from conceptual.serve.captioner_deployment import PixelBudget


async def holder(budget: PixelBudget, pixels: int, order: list[int], release: asyncio.Event):
    async with budget.reserve(pixels):
        order.append(pixels)
        await release.wait()


async def settle() -> None:
    for _ in range(5):  # let every waiting task run up to its next wait
        await asyncio.sleep(0)


def test_a_reservation_waits_until_its_pixels_fit():
    async def scenario():
        budget, order, release = PixelBudget(100), [], asyncio.Event()
        first = asyncio.create_task(holder(budget, 60, order, release))
        await settle()
        second = asyncio.create_task(holder(budget, 50, order, asyncio.Event()))
        await settle()
        assert order == [60] and budget.reserved == 60  # 60 + 50 > 100: the second waits
        release.set()
        await first
        await settle()
        assert order == [60, 50] and budget.reserved == 50
        second.cancel()

    asyncio.run(scenario())


def test_first_come_first_served_and_no_image_waits_forever():
    async def scenario():
        budget, order, release = PixelBudget(100), [], asyncio.Event()
        tasks = [asyncio.create_task(holder(budget, 80, order, release))]
        await settle()
        tasks.append(asyncio.create_task(holder(budget, 500, order, release)))  # over it all
        await settle()
        tasks.append(asyncio.create_task(holder(budget, 10, order, release)))  # would fit now
        await settle()
        assert order == [80]  # the 10 waits behind the big one, which is not starved
        release.set()
        await asyncio.gather(*tasks)
        assert order == [80, 500, 10] and budget.reserved == 0

    asyncio.run(scenario())


def test_a_shrunk_reservation_lets_the_next_one_in():
    async def scenario():
        budget, order = PixelBudget(100), []
        async with budget.reserve(90) as reservation:
            waiting = asyncio.create_task(holder(budget, 40, order, asyncio.Event()))
            await settle()
            assert order == []
            await budget.shrink(reservation, 10)  # a JPEG decoded at 1/8 scale
            await settle()
            assert order == [40] and budget.reserved == 50
            waiting.cancel()
        await settle()
        assert budget.reserved == 0

    asyncio.run(scenario())
