"""The bot stage, ``cm.bot.commands`` (Telegram updates, a lane per chat): the gateways (long
polling, webhook) admit updates through :mod:`codemojex.bot.api`; the command worker routes each
to one router per feature (:mod:`codemojex.bot.routers`)."""
