-- Reward Queue: a FiveM server resource that runs the rewards the server list queues for your players.
-- Copy the folder reward-queue/ to your server's resources/, set the convars in server.cfg, add `ensure reward-queue`
-- (see README.md). Server side only: nothing is sent to the players' clients.
fx_version 'cerulean'
game 'gta5'
lua54 'yes'

name 'reward-queue'
description 'Runs the vote, streak and milestone rewards the server list queues for your players'
version '1.0.0'

server_script 'server.lua'
