-- name: enqueue
INSERT INTO mail_outbox (kind, to_address, subject, text_body, html_body)
VALUES (%(kind)s, %(to_address)s, %(subject)s, %(text_body)s, %(html_body)s)
RETURNING id;
