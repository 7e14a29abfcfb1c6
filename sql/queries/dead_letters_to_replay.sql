-- Dead letters to re-drive: of one topic ('' = every topic), rejected at or after a time, and not
-- replayed before unless asked again. Oldest first, so events are re-sent in their order.
SELECT d.id, d.topic, d.reason, d.raw, d.time
FROM dead_letters AS d FINAL
WHERE ({topic:String} = '' OR d.topic = {topic:String})
  AND d.time >= {since:DateTime64(3, 'UTC')}
  AND ({again:UInt8} = 1 OR d.id NOT IN (SELECT id FROM dead_letter_replays))
ORDER BY d.time, d.id
