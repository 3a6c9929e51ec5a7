-- A live e-mail revert link reserves its address for its user (SPEC 3.4): sign-up and
-- e-mail changes look the address up among revert links, so that look-up is indexed.
CREATE INDEX one_time_tokens_revert_email_idx ON one_time_tokens (email) WHERE purpose = 'email_revert';
